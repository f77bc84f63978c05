/** A FlowhintNode status for tests: a supported node with one programmed Service; `change` edits a copy. */
import type { FlowhintNodeStatus } from '../../api/index.ts';

export function nodeStatusFixture(change: (s: FlowhintNodeStatus) => void = () => {}): FlowhintNodeStatus {
  const status: FlowhintNodeStatus = {
    agentVersion: '0.1.0',
    support: { offload: 'Supported', reason: 'flowtables available', conntrackTimeouts: 'Supported' },
    kubeProxy: { mode: 'nftables', meaning: 'm' },
    services: { hinted: 1, programmed: 1, refused: 0 },
    notOffloadable: [],
    notOffloadableTotal: 0,
    lastSync: { time: '2026-12-05T00:00:00.000Z', kind: 'full', result: 'Succeeded' },
  };
  change(status);
  return status;
}

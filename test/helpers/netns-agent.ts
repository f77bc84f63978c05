/**
 * The real agent in a scratch network namespace on this machine's kernel, shared by
 * test/agent/netns*.test.ts: a Service manifest, and an agent on a file source with its own
 * state directory, torn down with the test.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent } from '../../agent/agent.ts';
import { createAgentMetrics } from '../../agent/report/metrics.ts';
import { makeNft } from '../../agent/nft/nft.ts';
import { FileSource } from '../../agent/sources/files.ts';
import { silentLogger } from '../../lib/log.ts';
import { createNetns, type Netns } from './netns.ts';

export const yaml = (name: string, ip: string, extra = '') => `apiVersion: v1
kind: Service
metadata:
  name: ${name}
  namespace: demo
  annotations: {flowhint.dev/traffic-hint: LongLived${extra}}
spec:
  clusterIP: ${ip}
  clusterIPs: [${ip}]
  ports: [{port: 80, protocol: TCP}, {port: 53, protocol: UDP, nodePort: 30053}]
`;

export function setup(t: { teardown: (fn: () => void) => void }, nftBinary = 'nft', logger = silentLogger()) {
  const ns = createNetns();
  const dir = mkdtempSync(join(tmpdir(), 'flowhint-svcs-'));
  const state = mkdtempSync(join(tmpdir(), 'flowhint-state-'));
  t.teardown(() => {
    ns.destroy();
    rmSync(dir, { recursive: true, force: true });
    rmSync(state, { recursive: true, force: true });
  });
  const metrics = createAgentMetrics({ defaultMetrics: false });
  const make = () => {
    const source = new FileSource({ dir, logger: silentLogger(), pollMs: 60_000 });
    const agent = new Agent({
      run: ns.run,
      nft: makeNft(ns.run, nftBinary),
      source,
      logger,
      metrics,
      defaultThreshold: 20,
      devices: {},
      counter: true,
      stateDir: state,
      backoff: { initialMs: 10, maxMs: 50 },
    });
    return { agent, source };
  };
  return { ns, dir, state, metrics, make };
}

/** Our three tables (those that exist: inet, then ip, then ip6), as nft prints them, without counters. */
export const list = (ns: Netns) =>
  (['inet', 'ip', 'ip6'] as const)
    .map((family) => {
      try {
        return ns.sh('nft', 'list', 'table', family, 'flowhint');
      } catch {
        return '';
      }
    })
    .join('')
    .replace(/ counter packets \d+ bytes \d+/g, '');

/**
 * `flowhint status`: the agent's status document, with offloaded-now counts read live from
 * conntrack, and whether the agent that wrote it still runs.
 */
import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { netnsName, parseFlags } from '../../lib/cli.ts';
import { netnsRunner } from '../../lib/exec.ts';
import { parseAddress } from '../state/address.ts';
import { buildDesired } from '../state/desired.ts';
import { DEFAULT_MARKS, readConntrackCounts } from '../host/conntrack.ts';
import { DEFAULT_STATE_DIR, formatStatus, readStatus } from './status.ts';

const StatusFlags = z.object({
  json: z.boolean().default(false),
  'state-dir': z.string().default(DEFAULT_STATE_DIR),
  netns: netnsName,
});

export async function statusCommand(argv: string[]): Promise<number> {
  const f = parseFlags(
    argv,
    {
      json: { type: 'boolean', help: 'print the status document as JSON' },
      'state-dir': { type: 'string', value: 'DIR', help: "the agent's --state-dir", default: DEFAULT_STATE_DIR },
      netns: { type: 'string', value: 'NAME', help: 'read offloaded connections in the named network namespace' },
    },
    StatusFlags,
    'usage: flowhint status [--json] [--state-dir DIR] [--netns NAME]',
  );
  const doc = await readStatus(f['state-dir']);
  if (!doc) {
    process.stderr.write(
      `flowhint: FH_NO_STATUS: no agent status in ${f['state-dir']}/status.json; is the agent running with this --state-dir?\n`,
    );
    return 1;
  }
  // Offloaded-now counts are read live from conntrack, not from the file.
  const state = buildDesired(
    doc.services.map((s) => ({
      key: s.service,
      hint: s.hint,
      threshold: s.threshold,
      timeout: s.timeoutSeconds,
      vips: s.addresses.flatMap((a) => parseAddress(a) ?? []),
      ports: s.ports.map(portMatch),
      nodePorts: s.nodePorts.map(portMatch),
    })),
    doc.node.nodeAddresses.flatMap((a) => parseAddress(a) ?? []),
  );
  const counts = await readConntrackCounts(netnsRunner(f.netns), state, doc.node.conntrackMarks ?? DEFAULT_MARKS);
  if (counts) {
    for (const s of doc.services) {
      if (s.hint === 'ShortLived') s.conntrackEntries = counts.entries.get(s.service) ?? 0;
      else s.offloadedNow = counts.offloaded.get(s.service) ?? 0;
    }
  }
  // A document whose agent has exited is its last word, not the node's state now.
  const running = agentRunning(doc.pid);
  if (f.json) {
    process.stdout.write(`${JSON.stringify({ ...doc, agentRunning: running }, null, 2)}\n`);
  } else {
    if (!running) {
      process.stdout.write(
        `agent: NOT RUNNING: pid ${doc.pid} has ended; below is its last status, written ${doc.updatedAt}\n`,
      );
    }
    process.stdout.write(formatStatus(doc));
  }
  return running ? 0 : 1;
}

/** Whether the agent that wrote a status document still runs (its pid is a flowhint process). */
function agentRunning(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('flowhint');
  } catch {
    return false;
  }
}

function portMatch(s: string) {
  const [proto, port] = s.split('/');
  return { proto: proto === 'udp' ? ('udp' as const) : ('tcp' as const), port: Number(port) };
}

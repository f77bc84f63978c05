/**
 * The conntrack series of `npm run bench:agent`: what one conntrack poll costs the agent on
 * a node whose conntrack table is busy, with the kernel-filtered streaming reader
 * (agent/host/conntrack.ts) and, side by side in the same run, the whole-dump reader it
 * replaced (`conntrack -L` read whole into one string, every line parsed: kept here only
 * as the baseline).
 *
 * A scratch network namespace stands for the node. Its table is filled with real entries:
 * UDP from one socket to many (address, port) pairs on the loopback device (nothing
 * listens, so every entry stays UNREPLIED; `nf_conntrack_udp_timeout` is raised so they
 * live through the run), to 0, 100,000 and the machine's `nf_conntrack_max` entries. Of
 * those, 2,000 go to hinted Services' ClusterIPs (UDP 53) and carry both of flowhint's
 * mark bits, set by a bench-own nft rule: the entries the agent's dumps return.
 *
 * Each (table, Services, reader) runs in its own child inside the namespace: the real
 * agent programs the Services, then polls POLLS times; the child reports its peak RSS
 * (getrusage maxRSS: the poll's high-water mark, not a sample) and CPU per poll, its own
 * plus the conntrack children's (cutime/cstime of /proc/self/stat).
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import {
  conntrackDestinations,
  countByService,
  entriesByService,
  readConntrackCounts,
  DEFAULT_MARKS,
} from '../agent/host/conntrack.ts';
import type { Runner } from '../lib/exec.ts';
import { benchAgent } from './bench-agent.ts';
import { deployedEnv, round } from './lib.ts';
import { fillConntrackIn, serviceVip } from '../test/helpers/conntrack-fill.ts';
import { buildDesired, type DesiredState } from '../agent/state/desired.ts';
import { intake } from '../agent/state/intake.ts';

const POLLS = Number(process.env.BENCH_POLLS ?? 5);
export type Reader = 'filtered' | 'whole';

export interface PollResult {
  entries: number;
  services: number;
  reader: Reader;
  /** Peak RSS of the agent process over programming and every poll (MiB). */
  rssPeakMiB: number;
  /** CPU per poll, the agent's and its conntrack children's (ms). */
  cpuMsPerPoll: number;
  /** Entries the poll counted into the Services' figures (both readers must agree). */
  counted: number;
}

/** Service i: half LongLived, half ShortLived, TCP 80 and UDP 53 (where the marked entries go). */
function service(i: number) {
  const hint = i % 2 ? 'ShortLived' : 'LongLived';
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: {
      name: `svc-${i}`,
      namespace: 'bench',
      annotations: { 'flowhint.dev/traffic-hint': hint },
      labels: { 'flowhint.dev/traffic-hint': hint },
    },
    spec: {
      clusterIP: serviceVip(i),
      clusterIPs: [serviceVip(i)],
      ports: [
        { name: 'http', port: 80, protocol: 'TCP' },
        { name: 'dns', port: 53, protocol: 'UDP' },
      ],
    },
  };
}

/** CPU so far of this process's waited-for children (ms). */
function childrenCpuMs(): number {
  // /proc/self/stat: fields after the ")" start at field 3; cutime and cstime are 16 and 17.
  const stat = readFileSync('/proc/self/stat', 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(f[13]) + Number(f[14])) * 10;
}

/** CPU so far, this process and its waited-for children (ms). */
function cpuMs(): number {
  const own = process.cpuUsage();
  return (own.user + own.system) / 1000 + childrenCpuMs();
}

/**
 * The floor under a poll: the same filtered dump by `conntrack` alone, started from this
 * (small) process, no agent. Most of it is the kernel walking its whole table.
 */
function conntrackAloneMs(ns: string): number {
  const bit = `0x${DEFAULT_MARKS.long.toString(16)}`;
  const c0 = childrenCpuMs();
  for (let p = 0; p < POLLS; p++)
    execFileSync('ip', ['netns', 'exec', ns, 'conntrack', '-L', '--mark', `${bit}/${bit}`], {
      stdio: 'ignore',
    });
  return (childrenCpuMs() - c0) / POLLS;
}

/** The reader flowhint used before this series: the whole dump as one string, every line parsed. */
async function wholeDump(run: Runner, state: DesiredState): Promise<number> {
  const r = await run(['conntrack', '-L'], { timeoutMs: 60_000 });
  if (r.code !== 0) throw new Error(`conntrack -L: ${r.stderr}`);
  const dests = conntrackDestinations(r.stdout);
  return sum(countByService(state, dests)) + sum(entriesByService(state, dests));
}

/** The filtered reader, as the agent's poll runs it. */
async function filtered(run: Runner, state: DesiredState): Promise<number> {
  const c = await readConntrackCounts(run, state, DEFAULT_MARKS);
  if (!c) throw new Error('conntrack failed');
  return sum(c.offloaded) + sum(c.entries);
}

const sum = (m: Map<string, number>) => [...m.values()].reduce((a, b) => a + b, 0);

/** In the child, inside the namespace. */
export async function measurePolls(entries: number, services: number, reader: Reader): Promise<PollResult> {
  const { agent, source, run } = await benchAgent();
  const events = Array.from({ length: services }, (_, i) => ({
    type: 'upsert' as const,
    key: `bench/svc-${i}`,
    object: service(i),
  }));
  source.sink!.events(events);
  const r = await agent.sync();
  if (!r.ok) throw new Error(`sync failed: ${r.error}`);
  // The newly hinted Services' live connections are marked after the sync, in the background
  // (agent/host/live-marks.ts: one more dump of the whole table); once, not per poll.
  await agent.marked();
  // The state the agent programmed, built by the same pure intake (what its poll reads).
  const entries_ = [...intake(events, { threshold: 20 }).updates.values()].flatMap((e) => e ?? []);
  const state = buildDesired(entries_, []);
  // Steady state, as the agent polls every 15 s: the first poll after a sync builds the
  // state's index (once per programmed state, host/conntrack.ts) and the sync's garbage is
  // collected by V8's background threads, whose CPU process.cpuUsage counts; both are the
  // sync's cost, not a poll's (measured at 1,000 Services: 10-25 ms on each of the first
  // polls straight after the sync, 1-2 ms once it settled). One untimed poll, a second's rest.
  const poll = reader === 'whole' ? wholeDump : filtered;
  await poll(run, state);
  await new Promise((r) => setTimeout(r, 1000));
  const c0 = cpuMs();
  let counted = 0;
  for (let p = 0; p < POLLS; p++) counted = await poll(run, state);
  const cpuMsPerPoll = (cpuMs() - c0) / POLLS;
  const rssPeakMiB = process.resourceUsage().maxRSS / 1024;
  await agent.stop({ cleanup: true });
  return { entries, services, reader, rssPeakMiB, cpuMsPerPoll, counted };
}

function inNs(ns: string, measured: string, args: string[]): string {
  const r = spawnSync('ip', ['netns', 'exec', ns, process.execPath, measured, ...args], {
    encoding: 'utf8',
    env: { ...process.env, NODE_OPTIONS: deployedEnv('agent.yaml', 'agent', 'NODE_OPTIONS') ?? '' },
    maxBuffer: 1 << 20,
  });
  if (r.status !== 0) throw new Error(`${args.join(' ')} failed: ${r.stderr}`);
  return r.stdout.trim().split('\n').at(-1)!;
}

/** The machine's conntrack limit, the "full" table. */
export function conntrackMax(): number {
  return Number(readFileSync('/proc/sys/net/netfilter/nf_conntrack_max', 'utf8').trim());
}

/** One table size: a namespace filled to `target` entries, every (Services, reader) measured in it by `measured` (bench/lib.ts). */
export function runTable(
  target: number,
  serviceCounts: readonly number[],
  measured: string,
): { actual: number; results: PollResult[]; aloneMs: number } {
  const ns = `fh-bench-ct-${process.pid}-${target}`;
  const sh = (...a: string[]) => execFileSync('ip', ['netns', 'exec', ns, ...a], { encoding: 'utf8' });
  execFileSync('ip', ['netns', 'add', ns]);
  try {
    sh('ip', 'link', 'set', 'lo', 'up');
    // 10.0.0.0/8 on lo is local (the ClusterIPs and the fill's destinations): nothing listens, so
    // each datagram leaves one UNREPLIED entry behind (the ICMP error it draws is only RELATED).
    sh('ip', 'addr', 'add', '10.0.0.1/8', 'dev', 'lo');
    const bits = `0x${(DEFAULT_MARKS.long | DEFAULT_MARKS.short).toString(16)}`;
    execFileSync('ip', ['netns', 'exec', ns, 'nft', '-f', '-'], {
      input: [
        'table ip fhbench {',
        '  chain out {',
        '    type filter hook output priority 0',
        `    ip daddr 10.96.0.0/16 udp dport 53 ct mark set ct mark | ${bits}`,
        '  }',
        '}',
        '',
      ].join('\n'),
    });
    const most = Math.max(...serviceCounts);
    if (target > 0) fillConntrackIn(ns, target, most);
    const actual = Number(sh('conntrack', '-C').trim());
    const aloneMs = conntrackAloneMs(ns);
    const results: PollResult[] = [];
    for (const services of serviceCounts)
      for (const reader of ['filtered', 'whole'] as const)
        results.push(
          JSON.parse(inNs(ns, measured, ['--polls', String(actual), String(services), reader])) as PollResult,
        );
    return { actual, results, aloneMs };
  } finally {
    execFileSync('ip', ['netns', 'del', ns]);
  }
}

export const rounded = (r: PollResult) => ({ rss: round(r.rssPeakMiB, 1), cpu: round(r.cpuMsPerPoll, 1) });

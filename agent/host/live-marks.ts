/**
 * A LongLived hint takes effect on the connections already open when it is programmed.
 *
 * The ruleset marks a connection at its first packet only (nft/render.ts, `new_pre`), so a
 * connection opened before its hint was programmed, or before the agent ran on the node,
 * would stay on the slow path until it ends; LongLived connections are the ones opened long
 * ago (a database pool, a gRPC stream, a tunnel). After each sync that adds LongLived
 * (address, protocol, port)s, the agent sets flowhint's mark bit on the live connections
 * whose original destination is one of them, with one
 * `conntrack -U -f F -p P --orig-dst A --dport N --mark BIT/BIT` each (the other bits of
 * the mark are kept). From their next packet past the threshold they are offloaded like new
 * ones. ShortLived connections are left alone (their timeout policy is set at the first
 * packet only).
 *
 * Each update walks the node's conntrack table once in the kernel, so it runs after the
 * sync, never inside it, one at a time, and only for the ports that have live connections:
 * with more than PASS_ABOVE ports to mark, one streamed dump of the entries without the bit
 * (filtered in the kernel) says which ports have any. On a first start beside a thousand
 * LongLived ports, an update per port walked the table a thousand times: in the VM that
 * took over 300 s, where one dump and the few ports with connections take seconds.
 */
import type { Logger } from 'pino';
import type { Runner } from '../../lib/exec.ts';
import { errorMessage } from '../../lib/errors.ts';
import type { LongElement } from '../state/desired.ts';
import { addressKey } from '../state/address.ts';
import { isMarkBit } from '../nft/names.ts';
import { conntrackLine, eachLine } from './conntrack.ts';

/** The argv that sets `bit` on the live connections to `e` (pure). */
export function markArgv(e: LongElement, bit: number): string[] {
  if (!isMarkBit(bit)) throw new Error(`refusing conntrack mark ${bit}: not a single bit`);
  const mark = `0x${bit.toString(16)}`;
  const family = e.address.family === 'ip' ? 'ipv4' : 'ipv6';
  const proto = e.proto === 'tcp' ? 'tcp' : 'udp';
  const port = String(e.port);
  return [
    'conntrack',
    '-U',
    '-f',
    family,
    '-p',
    proto,
    '--orig-dst',
    e.address.addr,
    '--dport',
    port,
    '--mark',
    `${mark}/${mark}`,
  ];
}

/**
 * What one `conntrack -U` did, from its exit code and message (pure). It updates only the
 * entries whose mark would change, and on a busy table it can stop part way (the kernel
 * drops dump messages: "Operation failed: No buffer space available"), so `done` says
 * whether every matching entry now carries the bit: it exited 0, or found none left.
 */
export function updateOutcome(code: number, stderr: string): { updated: number; done: boolean } {
  const n = /(\d+) flow entries have been updated/.exec(stderr)?.[1];
  const updated = n === undefined ? 0 : Number(n);
  // conntrack exits 1 when nothing matched, with the same message.
  const done = n !== undefined && (code === 0 || updated === 0) && !/Operation failed/.test(stderr);
  return { updated, done };
}

/** Attempts per (address, protocol, port): each repeats only what the one before missed. */
export const ATTEMPTS = 4;
/** Up to this many ports, update each at once; above, find first which have live connections. */
export const PASS_ABOVE = 2;

/** The argv of one dump of the entries without `bit`, filtered in the kernel (pure). */
export function unmarkedArgv(bit: number): string[] {
  if (!isMarkBit(bit)) throw new Error(`refusing conntrack mark ${bit}: not a single bit`);
  return ['conntrack', '-L', '--mark', `0x0/0x${bit.toString(16)}`];
}

const liveKey = (addr: string, proto: string, port: number) => `${addr} ${proto} ${port}`;

/**
 * The elements that have live connections without the bit, from one streamed dump; all of
 * them if the dump fails (each update then finds out for itself).
 */
async function withLive(run: Runner, elements: readonly LongElement[], bit: number): Promise<LongElement[]> {
  const wanted = new Set(elements.map((e) => liveKey(addressKey(e.address), e.proto, e.port)));
  const found = new Set<string>();
  const onLine = (line: string) => {
    const d = conntrackLine(line);
    const k = d && liveKey(d.addr, d.proto, d.port);
    if (k && wanted.has(k)) found.add(k);
  };
  if (!(await eachLine(run, unmarkedArgv(bit), onLine, 120_000))) return [...elements];
  return elements.filter((e) => found.has(liveKey(addressKey(e.address), e.proto, e.port)));
}

/** Mark the live connections to `elements`; returns how many entries were marked. */
export async function markLive(
  run: Runner,
  elements: readonly LongElement[],
  bit: number,
  log: Logger,
  stopped: () => boolean = () => false,
): Promise<number> {
  let marked = 0;
  let failed = 0;
  let why = '';
  // conntrack prints every entry it updates: read as lines and dropped, never kept.
  const once = (argv: string[]) => (run.lines ? run.lines(argv, () => undefined) : run(argv));
  const live = elements.length > PASS_ABOVE ? await withLive(run, elements, bit).catch(() => [...elements]) : elements;
  for (const e of live) {
    let done = false;
    for (let attempt = 0; attempt < ATTEMPTS && !done && !stopped(); attempt++) {
      const r = await once(markArgv(e, bit)).catch((err: unknown) => ({
        code: -1,
        stdout: '',
        stderr: errorMessage(err),
      }));
      const o = updateOutcome(r.code, r.stderr);
      marked += o.updated;
      done = o.done;
      if (!done) why = r.stderr.trim().split('\n').at(-1) ?? `exit ${r.code}`;
    }
    if (stopped()) break;
    if (!done) failed += 1;
  }
  if (failed > 0)
    log.warn(
      { failed, reason: why },
      'cannot mark every live connection of newly hinted Services; the rest are offloaded when they reconnect',
    );
  else if (marked > 0) log.info({ marked, ports: elements.length }, 'live connections of newly hinted Services marked');
  return marked;
}

/**
 * The ruleset's vocabulary: the names of the objects in the agent's tables (`inet`, `ip` and
 * `ip6 flowhint`; an object's family is in its name: transaction.ts familyOfName), the priority of its
 * first-packet chains, the conntrack mark bit, what may be written as a device name, the
 * options a rendering takes, and the table's shape (which hints are in use). render.ts
 * builds transactions from these; the agent, drift and the reports read them.
 */
import type { DesiredState } from '../state/desired.ts';
import type { NodeTimeouts } from '../state/timeout-policy.ts';
import type { TableFamily } from './transaction.ts';

export const FLOWTABLE = 'fastpath';
/** The forward base chain (one mark test per packet) and the chain it sends marked connections to. */
export const BASE_CHAIN = 'classify';
export const HINTED_CHAIN = 'hinted';
/**
 * The NAT chains that see a connection's first packet: prerouting, and output (hostNetwork
 * Pods), one pair per family in that family's own table, so a family without hints has no
 * NAT hook of flowhint's.
 */
export const NEW_PRE = { ip: 'new_pre4', ip6: 'new_pre6' } as const;
export const NEW_OUT = { ip: 'new_out4', ip6: 'new_out6' } as const;
export const MAP = { ip: 'vips4', ip6: 'vips6' } as const;
export const SEEN = { ip: 'seen4', ip6: 'seen6' } as const;
export const LONG_SET = { ip: 'long4', ip6: 'long6' } as const;
export const SHORT_MAP = { ip: 'short4', ip6: 'short6' } as const;
/** The objects of a family's own table (`ip` or `ip6`) that have fixed names. */
const FAMILY_OBJECTS = new Map<string, 'ip' | 'ip6'>(
  [NEW_PRE, NEW_OUT, LONG_SET, SHORT_MAP].flatMap((n) => [
    [n.ip, 'ip'],
    [n.ip6, 'ip6'],
  ]),
);
/**
 * The prefixes of the hashed names in a family's own table: the ShortLived chains
 * (short-lived.ts shortChainName) and their timeouts (timeout-policy.ts timeoutObjectName).
 */
const FAMILY_PREFIXES = new Map<string, 'ip' | 'ip6'>([
  ['s4_', 'ip'],
  ['s6_', 'ip6'],
  ['c4_', 'ip'],
  ['c6_', 'ip6'],
]);

/**
 * The table an object belongs in, by its name: an object's family is part of its name.
 * `new_pre4`, `new_out4`, `long4`, `short4`, the ShortLived chains `s4_<hash>` and their
 * timeouts `c4_<hash>` are the `ip` table's (6: `ip6`); everything else (the flowtable,
 * `classify`, `hinted`, `vips4`, `seen4`, `v4_<hash>`, an old layout's names) `inet`'s.
 */
export function familyOfName(name: string): TableFamily {
  return FAMILY_OBJECTS.get(name) ?? FAMILY_PREFIXES.get(name.slice(0, 3)) ?? 'inet';
}

/** Before kube-proxy's DNAT (-100): the packet still carries the Service address and port. */
export const NEW_PRIORITY = -110;
/** The conntrack mark bit that says "a LongLived port": `--ct-mark-bit`. */
export const DEFAULT_CT_MARK = 0x2000;
/**
 * The bit that says "a ShortLived port" (`--short-lived-mark-bit`): set with the timeout at
 * the first packet, so the agent counts those entries with a dump the kernel filters
 * (`conntrack -L --mark BIT/BIT`) instead of reading the node's whole table.
 */
export const DEFAULT_SHORT_MARK = 0x1000;
/** Bound on the counting sets; stale addresses are pruned at each full sync. */
export const SEEN_SIZE = 65536;

export interface RenderOptions {
  /** The kernel supports flowtables. When false: no flowtable and no `flow add` (degraded). */
  readonly flowtable: boolean;
  readonly devices: readonly string[];
  /** The flowtable `counter` flag: keeps conntrack byte counts true for offloaded flows. */
  readonly counter: boolean;
  /** The kernel supports `ct timeout` objects. When false, ShortLived chains stay empty (degraded). */
  readonly ctTimeout?: boolean;
  /** The node's conntrack timeouts, which ShortLived policies start from; the kernel's defaults if absent. */
  readonly nodeTimeouts?: NodeTimeouts;
  /** The conntrack mark bit for LongLived connections (a power of two); DEFAULT_CT_MARK if absent. */
  readonly ctMark?: number;
  /** The conntrack mark bit for ShortLived connections; DEFAULT_SHORT_MARK if absent. */
  readonly shortMark?: number;
}

/** Which hints of one family are in use: what decides that family's NAT chains and their rules. */
export interface FamilyShape {
  readonly long: boolean;
  readonly short: boolean;
}

/** Which hints are in use: what decides the tables' base chains, their rules and the flowtable. */
export interface Shape {
  readonly long: boolean;
  readonly short: boolean;
  /** Per family (`ip`, `ip6`): its first-packet chains exist only while it has a hint. */
  readonly ip: FamilyShape;
  readonly ip6: FamilyShape;
  /**
   * The lowest LongLived threshold in use (0 when none): `classify` sends a LongLived
   * connection to `hinted` only past it, since no offload rule can match before (each is
   * `ct packets > its threshold`). A short connection's packets then meet one rule, not the
   * address map and its port rules (issue 35: the per-connection cost).
   */
  readonly floor: number;
}

export function shapeOf(state: DesiredState): Shape {
  let floor = Infinity;
  for (const c of state.chains.values()) for (const r of c.rules) floor = Math.min(floor, r.threshold);
  const long = [...state.chains.values()].map((c) => c.family);
  const short = [...state.shortChains.values()].map((c) => c.family);
  const family = (f: 'ip' | 'ip6'): FamilyShape => ({ long: long.includes(f), short: short.includes(f) });
  return {
    long: long.length > 0,
    short: short.length > 0,
    ip: family('ip'),
    ip6: family('ip6'),
    floor: floor === Infinity ? 0 : floor,
  };
}

const sameFamily = (a: FamilyShape, b: FamilyShape) => a.long === b.long && a.short === b.short;

export function sameShape(a: Shape, b: Shape): boolean {
  return (
    a.long === b.long &&
    a.short === b.short &&
    a.floor === b.floor &&
    sameFamily(a.ip, b.ip) &&
    sameFamily(a.ip6, b.ip6)
  );
}

/**
 * Whether `n` can be the mark bit: one of bits 0 to 30 of the conntrack mark. (nft lists a
 * test of bit 31 as a prefix, `ct mark != 0x00000000/1`, which would read back as drift.)
 */
export function isMarkBit(n: number): boolean {
  return Number.isInteger(n) && n >= 1 && n <= 0x40000000 && (n & (n - 1)) === 0;
}

/** Interface names as the kernel allows them, minus anything that could end a token. */
const DEVICE = /^[A-Za-z0-9_.-]{1,15}$/;
export function isRenderableDevice(name: string): boolean {
  return DEVICE.test(name);
}

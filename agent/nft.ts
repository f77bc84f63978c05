/**
 * The agent's only side effect on the ruleset: `nft -f -` with a transaction on stdin, and
 * `nft -j list table inet flowhint` to read back what is there. Both through a Runner.
 */
import { z } from 'zod';
import type { Runner } from '../lib/exec.ts';
import { FlowhintError } from '../lib/errors.ts';
import { FAMILY, TABLE, type Listing } from './render.ts';

export class NftError extends FlowhintError {
  readonly stderr: string;
  constructor(code: string, message: string, stderr: string) {
    super(code, message);
    this.stderr = stderr;
  }
}

const Named = z.looseObject({ name: z.string(), table: z.string().optional(), family: z.string().optional() });
/** A flowtable as `nft -j` prints it (its table's own listing, or `list flowtables`). */
export const FlowtableJson = Named.extend({ prio: z.number().optional(), dev: z.union([z.string(), z.array(z.string())]).optional() });

/** Its devices: nft prints one device as a string, several as an array. */
export function flowtableDevices(f: z.infer<typeof FlowtableJson>): string[] {
  return f.dev === undefined ? [] : Array.isArray(f.dev) ? f.dev : [f.dev];
}
const ListingJson = z.looseObject({
  nftables: z.array(
    z.looseObject({
      chain: Named.optional(),
      rule: z.looseObject({ chain: z.string() }).optional(),
      counter: Named.extend({ packets: z.number().optional(), bytes: z.number().optional() }).optional(),
      map: Named.extend({ elem: z.array(z.unknown()).optional() }).optional(),
      set: Named.extend({ elem: z.array(z.unknown()).optional() }).optional(),
      flowtable: FlowtableJson.optional(),
      'ct timeout': Named.optional(),
    }),
  ),
});

const SeenElem = z.looseObject({ elem: z.looseObject({ val: z.string(), counter: z.looseObject({ packets: z.number() }).optional() }) });

export interface ReadTable extends Listing {
  readonly seenElements: ReadonlyMap<string, readonly string[]>;
  /** Counting-set element counters: set name -> address -> packets. */
  readonly seenCounters: ReadonlyMap<string, ReadonlyMap<string, number>>;
  readonly ruleCounts: ReadonlyMap<string, number>;
  readonly elementCounts: ReadonlyMap<string, number>;
}

export function parseListing(json: string): ReadTable {
  const parsed = ListingJson.parse(JSON.parse(json));
  const chains = new Set<string>();
  const counters = new Set<string>();
  const maps = new Set<string>();
  const sets = new Set<string>();
  const flowtables = new Map<string, { devices: string[] }>();
  const ruleCounts = new Map<string, number>();
  const elementCounts = new Map<string, number>();
  const seenElements = new Map<string, string[]>();
  const seenCounters = new Map<string, Map<string, number>>();
  const ctTimeouts = new Set<string>();
  for (const o of parsed.nftables) {
    if (o['ct timeout']) ctTimeouts.add(o['ct timeout'].name);
    if (o.chain) chains.add(o.chain.name);
    if (o.rule) ruleCounts.set(o.rule.chain, (ruleCounts.get(o.rule.chain) ?? 0) + 1);
    if (o.counter) {
      counters.add(o.counter.name);
    }
    if (o.map) {
      maps.add(o.map.name);
      elementCounts.set(o.map.name, o.map.elem?.length ?? 0);
    }
    if (o.set) {
      sets.add(o.set.name);
      const addrs: string[] = [];
      const counts = new Map<string, number>();
      for (const e of o.set.elem ?? []) {
        if (typeof e === 'string') {
          addrs.push(e);
          continue;
        }
        const p = SeenElem.safeParse(e);
        if (p.success) {
          addrs.push(p.data.elem.val);
          counts.set(p.data.elem.val, p.data.elem.counter?.packets ?? 0);
        }
      }
      seenElements.set(o.set.name, addrs);
      seenCounters.set(o.set.name, counts);
    }
    if (o.flowtable) flowtables.set(o.flowtable.name, { devices: flowtableDevices(o.flowtable) });
  }
  return { chains, counters, ctTimeouts, maps, sets, flowtables, ruleCounts, elementCounts, seenElements, seenCounters };
}

export interface Nft {
  /** Apply one transaction atomically; throws NftError with nft's message on failure. */
  apply(transaction: string): Promise<void>;
  /** Validate a transaction in the kernel without committing it (`nft -c`). */
  check(transaction: string): Promise<{ ok: boolean; stderr: string }>;
  /** The table as it is now, or `undefined` if it does not exist. */
  read(): Promise<ReadTable | undefined>;
  /** `nft list table inet flowhint`, for people. */
  listText(): Promise<string | undefined>;
}

export function makeNft(run: Runner, nftBinary = 'nft'): Nft {
  return {
    async apply(transaction) {
      if (transaction.length === 0) return;
      const r = await run([nftBinary, '-f', '-'], { stdin: transaction });
      if (r.code !== 0) {
        const first = r.stderr.split('\n').find((l) => l.trim().length > 0) ?? `exit ${r.code}`;
        throw new NftError(r.code === 127 ? 'FH_NFT_MISSING' : 'FH_NFT_FAILED', `nft transaction failed: ${first}`, r.stderr);
      }
    },
    async check(transaction) {
      const r = await run([nftBinary, '-c', '-f', '-'], { stdin: transaction });
      return { ok: r.code === 0, stderr: r.stderr };
    },
    async read() {
      const r = await run([nftBinary, '-j', 'list', 'table', FAMILY, TABLE]);
      if (r.code !== 0) {
        if (/No such file or directory/.test(r.stderr)) return undefined;
        throw new NftError(r.code === 127 ? 'FH_NFT_MISSING' : 'FH_NFT_FAILED', `cannot list table ${FAMILY} ${TABLE}: ${r.stderr.trim()}`, r.stderr);
      }
      return parseListing(r.stdout);
    },
    async listText() {
      const r = await run([nftBinary, 'list', 'table', FAMILY, TABLE]);
      return r.code === 0 ? r.stdout : undefined;
    },
  };
}

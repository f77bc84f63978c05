/**
 * The agent's only side effect on the ruleset: `nft -f -` with a transaction on stdin, and
 * `nft -j list table <family> flowhint` (inet, ip, ip6) to read back what is there. Both
 * through a Runner.
 */
import { z } from 'zod';
import type { Runner } from '../../lib/exec.ts';
import { FlowhintError } from '../../lib/errors.ts';
import { familyOfName } from './names.ts';
import type { MapModel, SetModel, TableModel } from './table-model.ts';
import {
  FAMILIES,
  FAMILY,
  TABLE,
  toText,
  type Hook,
  type TableFamily,
  type TimeoutSpec,
  type Transaction,
} from './transaction.ts';

/**
 * Why nft failed, classified once from its exit status and its own words (as knftables'
 * IsNotFound / IsAlreadyExists): the object is missing, already exists, is in use (busy),
 * the nft binary is missing, or anything else.
 */
export type NftFailure = 'not-found' | 'exists' | 'busy' | 'missing-binary' | 'other';

export function classifyNft(exitCode: number, stderr: string): NftFailure {
  if (exitCode === 127) return 'missing-binary';
  if (/No such file or directory/.test(stderr)) return 'not-found';
  if (/File exists/.test(stderr)) return 'exists';
  if (/Device or resource busy/.test(stderr)) return 'busy';
  return 'other';
}

export class NftError extends FlowhintError {
  readonly stderr: string;
  readonly failure: NftFailure;
  constructor(failure: NftFailure, message: string, stderr: string) {
    super(failure === 'missing-binary' ? 'FH_NFT_MISSING' : 'FH_NFT_FAILED', message);
    this.stderr = stderr;
    this.failure = failure;
  }
}

/** What `nft -c` said of a transaction: valid, or why not. */
export type CheckResult =
  { readonly ok: true } | { readonly ok: false; readonly failure: NftFailure; readonly stderr: string };

const Named = z.looseObject({ name: z.string(), table: z.string().optional(), family: z.string().optional() });
/** A flowtable as `nft -j` prints it (its table's own listing, or `list flowtables`). */
export const FlowtableJson = Named.extend({
  prio: z.number().optional(),
  dev: z.union([z.string(), z.array(z.string())]).optional(),
});

/** Its devices: nft prints one device as a string, several as an array. */
export function flowtableDevices(f: z.infer<typeof FlowtableJson>): string[] {
  return f.dev === undefined ? [] : Array.isArray(f.dev) ? f.dev : [f.dev];
}
const Hooked = Named.extend({ type: z.string().optional(), hook: z.string().optional(), prio: z.number().optional() });
const ElemJson = z.array(z.unknown()).optional();
const ListingJson = z.looseObject({
  nftables: z.array(
    z.looseObject({
      chain: Hooked.optional(),
      rule: z
        .looseObject({ chain: z.string(), expr: z.array(z.record(z.string(), z.unknown())).optional() })
        .optional(),
      counter: Named.optional(),
      map: Named.extend({ type: z.union([z.string(), z.array(z.string())]).optional(), elem: ElemJson }).optional(),
      set: Named.extend({
        type: z.union([z.string(), z.array(z.string())]).optional(),
        flags: z.union([z.string(), z.array(z.string())]).optional(),
        size: z.number().optional(),
        elem: ElemJson,
      }).optional(),
      flowtable: FlowtableJson.extend({ handle: z.number().optional() }).optional(),
      'ct timeout': Named.extend({
        protocol: z.enum(['tcp', 'udp']).optional(),
        l3proto: z.enum(['ip', 'ip6']).optional(),
        // `null` when every state has the kernel's default (a policy that shortens nothing on this node).
        policy: z.record(z.string(), z.number()).nullable().optional(),
      }).optional(),
    }),
  ),
});

const SeenElem = z.looseObject({
  elem: z.looseObject({ val: z.string(), counter: z.looseObject({ packets: z.number() }).optional() }),
});
const Goto = z.looseObject({ goto: z.looseObject({ target: z.string() }) });

/** A value in nft's JSON (a string, a number, a `concat`), as nft writes it in text. */
function valueText(v: unknown): string {
  if (typeof v === 'string' || typeof v === 'number') return String(v);
  if (v && typeof v === 'object' && 'concat' in v && Array.isArray(v.concat))
    return v.concat.map(valueText).join(' . ');
  return exprText(v);
}

/** An expression of a rule: `meta l4proto`, `ct original ip daddr`, `th dport`, a concatenation. */
function exprText(e: unknown): string {
  if (!e || typeof e !== 'object') return valueText(e);
  const o = e as Record<
    string,
    Record<string, unknown> & { key?: string; dir?: string; protocol?: string; field?: string }
  >;
  if (o.meta) return `meta ${o.meta.key}`;
  if (o.ct) return `ct ${o.ct.dir ? `${o.ct.dir} ` : ''}${o.ct.key}`;
  if (o.payload) return `${o.payload.protocol} ${o.payload.field}`;
  const fib = o.fib as { result?: string; flags?: unknown } | undefined;
  if (fib) return `fib ${Array.isArray(fib.flags) ? fib.flags.join(' . ') : String(fib.flags)} ${fib.result}`;
  if ('concat' in o && Array.isArray(o.concat)) return o.concat.map(exprText).join(' . ');
  for (const op of ['&', '|'] as const) {
    const args: unknown = (o as Record<string, unknown>)[op];
    if (Array.isArray(args) && args.length === 2) return `${exprText(args[0])} ${op} ${valueText(args[1])}`;
  }
  return `?${JSON.stringify(e)}`;
}

/** One statement of a rule in nft's text, so the listing compares with what render.ts wrote. */
function statementText(s: Record<string, unknown>): string {
  const m = s.match as { op?: string; left?: unknown; right?: unknown } | undefined;
  if (m) {
    // nft leaves `==` out of what it prints, except after a bitwise test (`ct mark & 12288 == 8192`).
    const masked = !!m.left && typeof m.left === 'object' && '&' in m.left;
    // A `fib` test is printed `exists` (true) or `missing` (false).
    if (typeof m.right === 'boolean')
      return `${exprText(m.left)} ${m.right === (m.op !== '!=') ? 'exists' : 'missing'}`;
    const op = (m.op === '==' && !masked) || m.op === 'in' ? '' : `${m.op} `;
    return `${exprText(m.left)} ${op}${valueText(m.right)}`;
  }
  const vmap = s.vmap as { key?: unknown; data?: unknown } | undefined;
  if (vmap) return `${exprText(vmap.key)} vmap ${valueText(vmap.data)}`;
  const set = s.set as { op?: string; elem?: unknown; set?: unknown } | undefined;
  if (set) return `${set.op} ${valueText(set.set)} { ${exprText(set.elem)} }`;
  const flow = s.flow as { op?: string; flowtable?: unknown } | undefined;
  if (flow) return `flow ${flow.op} ${valueText(flow.flowtable)}`;
  if (typeof s['ct timeout'] === 'string') return `ct timeout set "${s['ct timeout']}"`;
  const mangle = s.mangle as { key?: unknown; value?: unknown } | undefined;
  if (mangle) return `${exprText(mangle.key)} set ${exprText(mangle.value)}`;
  const goto = s.goto as { target?: unknown } | undefined;
  if (goto && typeof goto.target === 'string') return `goto ${goto.target}`;
  return `?${JSON.stringify(s)}`;
}

const keyType = (t: string | string[] | undefined) => (Array.isArray(t) ? t.join(' . ') : (t ?? ''));

function mapElements(elems: readonly unknown[] | undefined): Map<string, string> {
  const out = new Map<string, string>();
  for (const e of elems ?? []) {
    if (!Array.isArray(e) || e.length !== 2) continue;
    const verdict = Goto.safeParse(e[1]);
    out.set(valueText(e[0]), verdict.success ? verdict.data.goto.target : `?${JSON.stringify(e[1])}`);
  }
  return out;
}

function setElements(elems: readonly unknown[] | undefined): Map<string, number> {
  const out = new Map<string, number>();
  for (const e of elems ?? []) {
    if (typeof e === 'string' || (e && typeof e === 'object' && 'concat' in e)) {
      out.set(valueText(e), 0);
      continue;
    }
    const p = SeenElem.safeParse(e);
    if (p.success) out.set(p.data.elem.val, p.data.elem.counter?.packets ?? 0);
  }
  return out;
}

/**
 * `nft -j list table <family> flowhint` as the table model. Objects whose name belongs in
 * another table (an older flowhint's layout) are listed in `misplaced` as well.
 */
export function parseListing(json: string, family: TableFamily = 'inet'): TableModel {
  const parsed = ListingJson.parse(JSON.parse(json));
  const chains = new Map<string, { base?: Hook; rules: string[] }>();
  const maps = new Map<string, MapModel>();
  const sets = new Map<string, SetModel>();
  const flowtables = new Map<string, { devices: Set<string>; handle: number }>();
  const ctTimeouts = new Map<string, TimeoutSpec>();
  const counters = new Set<string>();
  const chain = (name: string) => {
    const c = chains.get(name) ?? { rules: [] };
    chains.set(name, c);
    return c;
  };
  for (const o of parsed.nftables) {
    const t = o['ct timeout'];
    if (t)
      ctTimeouts.set(t.name, { protocol: t.protocol ?? 'tcp', l3proto: t.l3proto ?? 'ip', policy: t.policy ?? {} });
    if (o.chain) {
      const c = chain(o.chain.name);
      if (o.chain.hook !== undefined)
        c.base = {
          ...(o.chain.type === 'nat' ? { type: 'nat' as const } : {}),
          hook: o.chain.hook,
          priority: o.chain.prio ?? 0,
        };
    }
    if (o.rule) chain(o.rule.chain).rules.push((o.rule.expr ?? []).map(statementText).join(' '));
    if (o.counter) counters.add(o.counter.name);
    if (o.map) maps.set(o.map.name, { key: keyType(o.map.type), elements: mapElements(o.map.elem) });
    // nft 1.0.6's JSON leaves out `flags dynamic`; the counting sets are the ones with a size.
    if (o.set)
      sets.set(o.set.name, {
        key: keyType(o.set.type),
        dynamic: [o.set.flags ?? []].flat().includes('dynamic') || o.set.size !== undefined,
        elements: setElements(o.set.elem),
      });
    if (o.flowtable)
      flowtables.set(o.flowtable.name, {
        devices: new Set(flowtableDevices(o.flowtable)),
        handle: o.flowtable.handle ?? 0,
      });
  }
  const names = [flowtables, chains, maps, sets, ctTimeouts].flatMap((m) => [...m.keys()]);
  const misplaced = [...names, ...counters].filter((n) => familyOfName(n) !== family).sort();
  const tables = new Set([family]);
  return {
    tables,
    flowtables,
    chains,
    maps,
    sets,
    ctTimeouts,
    counters,
    nextHandle: 0,
    ...(misplaced.length > 0 ? { misplaced } : {}),
  };
}

/** Several tables' models as one (their names do not collide: transaction.ts familyOfName). */
export function mergeModels(models: ReadonlyArray<TableModel | undefined>): TableModel | undefined {
  const found = models.filter((m): m is TableModel => m !== undefined);
  if (found.length === 0) return undefined;
  const union = <V>(pick: (m: TableModel) => ReadonlyMap<string, V>) => new Map(found.flatMap((m) => [...pick(m)]));
  const misplaced = found.flatMap((m) => m.misplaced ?? []);
  return {
    tables: new Set(found.flatMap((m) => [...m.tables])),
    flowtables: union((m) => m.flowtables),
    chains: union((m) => m.chains),
    maps: union((m) => m.maps),
    sets: union((m) => m.sets),
    ctTimeouts: union((m) => m.ctTimeouts),
    counters: new Set(found.flatMap((m) => [...m.counters])),
    nextHandle: 0,
    ...(misplaced.length > 0 ? { misplaced } : {}),
  };
}

export interface Nft {
  /** Apply one transaction atomically, on `table` (default: ours); throws NftError with nft's message on failure. */
  apply(transaction: Transaction, table?: string): Promise<void>;
  /** Validate a transaction in the kernel without committing it (`nft -c`), on `table` (default: ours). */
  check(transaction: Transaction, table?: string): Promise<CheckResult>;
  /**
   * Our three tables as they are now (one model, one `nft` run each), or `undefined` if none
   * exists; with `table`, that `inet` table only (the probes').
   */
  read(table?: string): Promise<TableModel | undefined>;
  /** Our `inet` table only (one `nft` run): for callers that need only the flowtable or the counting sets. */
  readInet(): Promise<TableModel | undefined>;
  /** `nft list table` of our three, for people. */
  listText(): Promise<string | undefined>;
}

export function makeNft(run: Runner, nftBinary = 'nft'): Nft {
  const listOne = async (family: TableFamily, table: string) => {
    const r = await run([nftBinary, '-j', 'list', 'table', family, table]);
    if (r.code !== 0) {
      const failure = classifyNft(r.code, r.stderr);
      if (failure === 'not-found') return undefined;
      throw new NftError(failure, `cannot list table ${family} ${table}: ${r.stderr.trim()}`, r.stderr);
    }
    return parseListing(r.stdout, family);
  };
  return {
    async apply(transaction, table) {
      if (transaction.length === 0) return;
      const r = await run([nftBinary, '-f', '-'], { stdin: toText(transaction, table) });
      if (r.code !== 0) {
        const first = r.stderr.split('\n').find((l) => l.trim().length > 0) ?? `exit ${r.code}`;
        throw new NftError(classifyNft(r.code, r.stderr), `nft transaction failed: ${first}`, r.stderr);
      }
    },
    async check(transaction, table) {
      const r = await run([nftBinary, '-c', '-f', '-'], { stdin: toText(transaction, table) });
      return r.code === 0 ? { ok: true } : { ok: false, failure: classifyNft(r.code, r.stderr), stderr: r.stderr };
    },
    async read(table = TABLE) {
      if (table !== TABLE) return listOne(FAMILY, table);
      const models: Array<TableModel | undefined> = [];
      for (const family of FAMILIES) models.push(await listOne(family, table));
      return mergeModels(models);
    },
    async readInet() {
      return listOne(FAMILY, TABLE);
    },
    async listText() {
      const texts: string[] = [];
      for (const family of FAMILIES) {
        const r = await run([nftBinary, 'list', 'table', family, TABLE]);
        if (r.code === 0) texts.push(r.stdout);
      }
      return texts.length > 0 ? texts.join('') : undefined;
    },
  };
}

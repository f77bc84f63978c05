/**
 * Flowtables of other owners on the devices flowhint offloads on: kindnet's fastpath,
 * Calico's offload, or a hand-written one. This module only finds and explains them, for
 * `status`, a metric and one log line per change.
 *
 * Why it matters: every flowtable registers its own ingress hook on each of its devices.
 * flowhint's transactions only ever name its own table, so another owner never makes them
 * fail, and flowhint never touches the other table. But an owner that offloads every
 * established connection (kindnet's and Calico's global switches) also offloads the Services
 * flowhint leaves alone: per-Service opt-in cannot hold on those devices while it is there.
 *
 * Parsing is pure; `readFlowtables` is the only I/O (through the Runner, so `--netns` reads
 * the right namespace).
 */
import { z } from 'zod';
import type { Runner } from '../../lib/exec.ts';
import { FlowtableJson, flowtableDevices } from '../nft/nft.ts';

export interface Flowtable {
  /** `family table`, as nft names it: `inet kindnet`. */
  readonly table: string;
  readonly name: string;
  /** The ingress hook priority, when nft reports one. */
  readonly priority: number | null;
  readonly devices: readonly string[];
}

const Listing = z.object({
  nftables: z.array(
    z.looseObject({ flowtable: FlowtableJson.extend({ family: z.string(), table: z.string() }).optional() }),
  ),
});

/** Every flowtable of `nft -j list flowtables` (pure). */
export function parseFlowtables(json: string): Flowtable[] {
  const out: Flowtable[] = [];
  for (const item of Listing.parse(JSON.parse(json)).nftables) {
    const f = item.flowtable;
    if (!f) continue;
    out.push({
      table: `${f.family} ${f.table}`,
      name: f.name,
      priority: f.prio ?? null,
      devices: [...flowtableDevices(f)].sort(),
    });
  }
  return out;
}

/**
 * The flowtables that are not `ownTable`'s and share at least one of `devices`, each with
 * only the shared devices, in a stable order (pure).
 */
export function otherFlowtables(all: readonly Flowtable[], ownTable: string, devices: readonly string[]): Flowtable[] {
  const mine = new Set(devices);
  return all
    .filter((f) => f.table !== ownTable)
    .map((f) => ({ ...f, devices: f.devices.filter((d) => mine.has(d)) }))
    .filter((f) => f.devices.length > 0)
    .sort((a, b) => `${a.table}/${a.name}`.localeCompare(`${b.table}/${b.name}`));
}

/** What `status` says about one (pure): `inet kindnet/fastpath on n0, n1 (priority 0)`. */
export function flowtableText(f: Flowtable): string {
  return `${f.table}/${f.name} on ${f.devices.join(', ')}${f.priority === null ? '' : ` (priority ${f.priority})`}`;
}

export const OTHER_FLOWTABLE_DETAIL =
  "another owner's flowtable on flowhint's devices: flowhint keeps its own table in step and never touches the other, but if that owner offloads every established connection (kindnet's fastpath, Calico's offload), Services without a hint are offloaded too";

/** The node's flowtables; undefined when nft cannot list them (say nothing rather than guess). */
export async function readFlowtables(run: Runner): Promise<Flowtable[] | undefined> {
  const r = await run(['nft', '-j', 'list', 'flowtables'], { timeoutMs: 10_000 });
  if (r.code !== 0) return undefined;
  try {
    return parseFlowtables(r.stdout || '{"nftables":[]}');
  } catch {
    return undefined;
  }
}

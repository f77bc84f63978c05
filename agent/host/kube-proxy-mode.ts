/**
 * Which kube-proxy mode runs on this node, from what each mode leaves in the kernel:
 *
 * - `ipvs`: the dummy device `kube-ipvs0` that holds the Service addresses (it also keeps
 *   iptables chains, so it is checked first);
 * - `nftables`: kube-proxy's own tables, `ip kube-proxy` / `ip6 kube-proxy`;
 * - `iptables`: its `KUBE-POSTROUTING` chain in the `nat` table, as iptables-nft writes it
 *   (legacy iptables is not visible to nft: that node reads `unknown`);
 * - `unknown`: none of these (another Service proxy, or kube-proxy not started yet).
 *
 * At most three small reads, cheapest first, and the chain is listed only when an `ip nat`
 * table exists and no kube-proxy table answered already. Classification is pure; `readKubeProxyMode` is the I/O (through the Runner, so
 * `--netns` reads the right namespace). Used for status only: it never changes what the
 * agent programs (IPVS ports are found per port by host/local-delivery.ts).
 */
import { z } from 'zod';
import type { KubeProxyMode } from '../../api/index.ts';
import type { Runner } from '../../lib/exec.ts';

export interface KubeProxyView {
  /** `family name` of every nft table. */
  readonly tables: readonly string[];
  /** Whether `ip nat` has the chain `KUBE-POSTROUTING`. */
  readonly iptablesChains: boolean;
  /** Whether the device `kube-ipvs0` exists. */
  readonly ipvsDevice: boolean;
}

/** The mode a view shows (pure). */
export function kubeProxyMode(v: KubeProxyView): KubeProxyMode {
  if (v.ipvsDevice) return 'ipvs';
  if (v.tables.includes('ip kube-proxy') || v.tables.includes('ip6 kube-proxy')) return 'nftables';
  if (v.iptablesChains) return 'iptables';
  return 'unknown';
}

const Tables = z.object({
  nftables: z.array(z.looseObject({ table: z.object({ family: z.string(), name: z.string() }).optional() })),
});

/** `family name` of each table in `nft -j list tables` (pure); a malformed answer lists none. */
export function parseTables(json: string): string[] {
  const parsed = Tables.safeParse(JSON.parse(json || '{"nftables":[]}'));
  if (!parsed.success) return [];
  return parsed.data.nftables.flatMap((e) => (e.table ? [`${e.table.family} ${e.table.name}`] : []));
}

export async function readKubeProxyMode(run: Runner): Promise<KubeProxyMode> {
  const opts = { timeoutMs: 10_000 };
  const none = { tables: [], iptablesChains: false, ipvsDevice: false };
  if ((await run(['ip', 'link', 'show', 'kube-ipvs0'], opts)).code === 0)
    return kubeProxyMode({ ...none, ipvsDevice: true });
  const listed = await run(['nft', '-j', 'list', 'tables'], opts);
  let tables: string[];
  try {
    tables = listed.code === 0 ? parseTables(listed.stdout) : [];
  } catch {
    tables = [];
  }
  const mode = kubeProxyMode({ ...none, tables });
  if (mode !== 'unknown' || !tables.includes('ip nat')) return mode;
  const chain = await run(['nft', 'list', 'chain', 'ip', 'nat', 'KUBE-POSTROUTING'], opts);
  return kubeProxyMode({ ...none, tables, iptablesChains: chain.code === 0 });
}

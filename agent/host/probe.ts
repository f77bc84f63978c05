/**
 * Kernel probe, as Calico does: validate, in the kernel, a throwaway table with a flowtable
 * and a `flow add` rule, using `nft -c` so nothing is ever committed (conntrack accounting:
 * host/accounting.ts).
 */
import type { Nft } from '../nft/nft.ts';
import { add, type Transaction } from '../nft/transaction.ts';
import { ROUTE_BACK } from '../nft/render.ts';

/** The throwaway table the probes validate (never committed). */
const PROBE_TABLE = 'flowhint_probe';

const PROBE: Transaction = [
  add({ type: 'table' }),
  add({ type: 'flowtable', name: 'p' }),
  add({ type: 'chain', name: 'c', base: { hook: 'forward', priority: 0 } }),
  // As the agent's offload rules (render.ts): `ct packets`, the reverse-path `fib`, `flow add`.
  add({ type: 'rule', chain: 'c', rule: `meta l4proto tcp ct packets > 1 ${ROUTE_BACK} flow add @p` }),
];

export interface ProbeResult {
  supported: boolean;
  /** nft's own words when unsupported. */
  reason: string;
}

/** The same, for ShortLived: a `ct timeout` object and a rule that sets it (nft_ct's timeout support). */
const CT_TIMEOUT_PROBE: Transaction = [
  add({ type: 'table' }),
  add({
    type: 'ct timeout',
    name: 't',
    spec: { protocol: 'udp', l3proto: 'ip', policy: { unreplied: 5, replied: 5 } },
  }),
  add({ type: 'chain', name: 'c', base: { hook: 'prerouting', priority: -150 } }),
  add({ type: 'rule', chain: 'c', rule: 'ct state new ct timeout set "t"' }),
];

export async function probeFlowtable(nft: Nft): Promise<ProbeResult> {
  return probe(nft, PROBE);
}

export async function probeCtTimeout(nft: Nft): Promise<ProbeResult> {
  return probe(nft, CT_TIMEOUT_PROBE);
}

async function probe(nft: Nft, transaction: Transaction): Promise<ProbeResult> {
  const r = await nft.check(transaction, PROBE_TABLE);
  if (r.ok) return { supported: true, reason: '' };
  if (r.failure === 'missing-binary') return { supported: false, reason: 'the nft binary is not installed' };
  const first = r.stderr.split('\n').find((l) => l.includes('Error')) ?? r.stderr.trim();
  return { supported: false, reason: first.replace(/^.*Error: /, '') || 'nft -c failed' };
}

/**
 * Two table models compared by content (pure): the same chains with the same rules in the
 * same order, the same elements with the same verdicts, the same timeout policies, the same
 * flowtable devices. Kernel handles and the counting sets' dynamic elements are not content.
 * drift.ts uses it to tell what changed behind the agent's back; the tests use it to compare
 * a real listing with the model a transaction leaves.
 */
import type { Hook, TimeoutSpec } from './transaction.ts';
import type { TableModel } from './table-model.ts';
import { KERNEL_TIMEOUTS } from '../state/timeout-policy.ts';

/** The same policy, counting a state the listing leaves out as the kernel's default. */
function sameTimeout(want: TimeoutSpec, have: TimeoutSpec): boolean {
  if (want.protocol !== have.protocol || want.l3proto !== have.l3proto) return false;
  // `nft list` shows only the states of a policy that differ from the kernel's defaults.
  const defaults: Readonly<Record<string, number>> = KERNEL_TIMEOUTS[want.protocol];
  const states = new Set([...Object.keys(want.policy), ...Object.keys(have.policy)]);
  return [...states].every((s) => (want.policy[s] ?? defaults[s]) === (have.policy[s] ?? defaults[s]));
}

const hookText = (h: Hook | undefined) => (h ? `${h.type ?? 'filter'} ${h.hook} ${h.priority}` : 'regular');

/**
 * Differences in content between what the table should hold and what it holds, as short
 * sentences (empty: the same). Counting-set elements, handles and set sizes are ignored;
 * `devices: 'subset'` accepts fewer flowtable devices than expected (the kernel drops a
 * device that disappears, which is not drift).
 */
export function tableDiff(
  want: TableModel | undefined,
  have: TableModel | undefined,
  o: { devices?: 'exact' | 'subset' } = {},
): string[] {
  if (!want || !have) return want === have ? [] : [want ? 'the table is missing' : 'the table exists but should not'];
  const out: string[] = [];
  for (const f of want.tables) if (!have.tables.has(f)) out.push(`table ${f} flowhint is missing`);
  for (const f of have.tables) if (!want.tables.has(f)) out.push(`table ${f} flowhint should not exist`);
  const names = (a: ReadonlyMap<string, unknown>, b: ReadonlyMap<string, unknown>, what: string) => {
    for (const k of a.keys()) if (!b.has(k)) out.push(`${what} ${k} is missing`);
    for (const k of b.keys()) if (!a.has(k)) out.push(`${what} ${k} should not exist`);
  };
  names(want.chains, have.chains, 'chain');
  for (const [name, w] of want.chains) {
    const h = have.chains.get(name);
    if (!h) continue;
    if (hookText(w.base) !== hookText(h.base))
      out.push(`chain ${name} hooks ${hookText(h.base)}, not ${hookText(w.base)}`);
    if (w.rules.join('\n') !== h.rules.join('\n'))
      out.push(`chain ${name} has rules [${h.rules.join('; ')}], not [${w.rules.join('; ')}]`);
  }
  names(want.maps, have.maps, 'map');
  for (const [name, w] of want.maps) {
    const h = have.maps.get(name);
    if (!h) continue;
    for (const [k, v] of w.elements) {
      const got = h.elements.get(k);
      if (got !== v)
        out.push(got === undefined ? `map ${name} lacks ${k}` : `map ${name}: ${k} goes to ${got}, not ${v}`);
    }
    for (const k of h.elements.keys()) if (!w.elements.has(k)) out.push(`map ${name} has ${k}, which it should not`);
  }
  names(want.sets, have.sets, 'set');
  for (const [name, w] of want.sets) {
    const h = have.sets.get(name);
    if (!h || w.dynamic) continue;
    for (const k of w.elements.keys()) if (!h.elements.has(k)) out.push(`set ${name} lacks ${k}`);
    for (const k of h.elements.keys()) if (!w.elements.has(k)) out.push(`set ${name} has ${k}, which it should not`);
  }
  names(want.ctTimeouts, have.ctTimeouts, 'ct timeout');
  for (const [name, w] of want.ctTimeouts) {
    const h = have.ctTimeouts.get(name);
    if (h && !sameTimeout(w, h)) out.push(`ct timeout ${name} is ${JSON.stringify(h)}, not ${JSON.stringify(w)}`);
  }
  for (const c of have.counters) if (!want.counters.has(c)) out.push(`counter ${c} should not exist`);
  names(want.flowtables, have.flowtables, 'flowtable');
  for (const [name, w] of want.flowtables) {
    const h = have.flowtables.get(name);
    if (!h) continue;
    const extra = [...h.devices].filter((d) => !w.devices.has(d));
    const lacking = [...w.devices].filter((d) => !h.devices.has(d));
    if (extra.length > 0 || (o.devices !== 'subset' && lacking.length > 0))
      out.push(
        `flowtable ${name} has devices [${[...h.devices].sort().join(', ')}], not [${[...w.devices].sort().join(', ')}]`,
      );
  }
  return out;
}

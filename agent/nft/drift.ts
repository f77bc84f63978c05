/**
 * Drift: how the table read back (`nft -j list table inet flowhint`) differs in content from
 * what the agent's last transaction left: the same chains with the same rules (protocol,
 * port, threshold), the same elements going to the same chains, the same timeout policies
 * and flowtable devices. A full sync repairs the table either way; this decides whether it
 * counts as a drift repair (flowhint_agent_drift_repairs_total) and says what differed.
 */
import type { DesiredState } from '../state/desired.ts';
import type { RenderOptions } from './names.ts';
import { fullTransaction } from './render.ts';
import { applyTransaction, type TableModel } from './table-model.ts';
import { tableDiff } from './table-diff.ts';

/** The table `state` rendered with `o` makes, from nothing: what the kernel should hold. */
export function expectedTable(state: DesiredState, o: RenderOptions): TableModel | undefined {
  return applyTransaction(undefined, fullTransaction(state, o));
}

/**
 * Differences between the table now and the one `state` rendered with `o` makes (empty: no
 * drift). The kernel removes a flowtable device that disappears by itself: fewer devices
 * than programmed is not drift.
 */
export function drift(current: TableModel | undefined, state: DesiredState, o: RenderOptions): string[] {
  return tableDiff(expectedTable(state, o), current, { devices: 'subset' });
}

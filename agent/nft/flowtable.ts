/**
 * The flowtable's operations: create it once, then add and remove devices in place, never
 * recreate it needlessly, so connections already offloaded on the other devices stay
 * offloaded (a restart leaves it untouched).
 */
import { FLOWTABLE, isRenderableDevice, type RenderOptions } from './names.ts';
import type { TableModel } from './table-model.ts';
import { add, del, flush, type Op } from './transaction.ts';

const flowtable = (devices?: readonly string[], counter?: boolean) => ({
  type: 'flowtable' as const,
  name: FLOWTABLE,
  ...(devices ? { devices: devices.filter(isRenderableDevice) } : {}),
  ...(counter ? { counter } : {}),
});

/** Flowtable operations for a full sync: create, or adjust devices in place (never recreate needlessly). */
export function flowtableOps(o: RenderOptions, current: TableModel | undefined): { before: Op[]; after: Op[] } {
  const before: Op[] = [];
  const after: Op[] = [];
  const existing = current?.flowtables.get(FLOWTABLE);
  for (const name of current?.flowtables.keys() ?? [])
    if (name !== FLOWTABLE) after.push(del({ type: 'flowtable', name }));
  if (!o.flowtable) {
    if (existing) after.push(del(flowtable()));
    return { before, after };
  }
  if (!existing) {
    before.push(add(flowtable(o.devices, o.counter)));
  } else {
    // Never recreated: that would drop every offloaded flow. (nft 1.0.6 does not list the
    // `counter` flag, so a changed --no-flowtable-counter takes effect after `flowhint cleanup`.)
    before.push(...deviceOps(existing.devices, o.devices));
  }
  return { before, after };
}

/**
 * Every offloaded flow back to the slow path: the flowtable deleted and created again in one
 * transaction. A flowtable entry outlives the rules that made it (it ends on FIN/RST, idle
 * timeout, device down, conntrack death or the flowtable's deletion), so this is how a
 * removed LongLived hint stops bypassing netfilter within one sync. The rules that name the
 * flowtable (`chains`, the shared offload chains) are flushed first; the caller adds them
 * back after. Still-hinted connections are offloaded again at their next packet: their
 * `ct packets` are past the threshold already.
 */
export function recreateOps(o: RenderOptions, chains: readonly string[]): Op[] {
  return [
    ...chains.map((name) => flush({ type: 'chain', name })),
    del(flowtable()),
    add(flowtable(o.devices, o.counter)),
  ];
}

/** Which devices to add and which to remove, each sorted; names that cannot be rendered are left alone. */
function deviceChanges(current: Iterable<string>, wanted: readonly string[]): { adds: string[]; dels: string[] } {
  const have = new Set(current);
  const want = new Set(wanted.filter(isRenderableDevice));
  return {
    adds: [...want].filter((d) => !have.has(d)).sort(),
    dels: [...have].filter((d) => !want.has(d) && isRenderableDevice(d)).sort(),
  };
}

/** Add and remove flowtable devices in place, so offloaded flows on the others stay offloaded. */
export function deviceOps(current: Iterable<string>, wanted: readonly string[]): Op[] {
  const { adds, dels } = deviceChanges(current, wanted);
  return [...(dels.length > 0 ? [del(flowtable(dels))] : []), ...(adds.length > 0 ? [add(flowtable(adds))] : [])];
}

/**
 * The same changes as deviceOps, one device per operation, each to go in a transaction of
 * its own: a device that vanishes fails only its own (pod churn faster than any re-listing).
 */
export function oneDeviceOps(current: Iterable<string>, wanted: readonly string[]): Op[] {
  const { adds, dels } = deviceChanges(current, wanted);
  return [...dels.map((d) => del(flowtable([d]))), ...adds.map((d) => add(flowtable([d])))];
}

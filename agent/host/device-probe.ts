/**
 * Whether this kernel adds and removes devices on a live flowtable (Linux 5.8 and later).
 * The agent does so whenever a pod's veth appears or goes, so that connections offloaded on
 * the other devices stay offloaded. Older kernels accept the same commands and do
 * something else: `add flowtable` on an existing flowtable changes nothing, and `delete
 * flowtable ... { devices = ... }` deletes the whole flowtable. A check-only probe (`nft -c`)
 * cannot tell those apart, so this one commits a throwaway table of its own, reads it back
 * after each step and deletes it. The device used is `lo`, which every network namespace has;
 * the throwaway flowtable holds no flow (no rule adds any), so `lo`'s packets meet an empty
 * lookup for the few milliseconds it exists.
 */
import { errorMessage } from '../../lib/errors.ts';
import type { Nft } from '../nft/nft.ts';
import { add, del, type Transaction } from '../nft/transaction.ts';
import type { ProbeResult } from './probe.ts';

/** The throwaway table (committed for a few milliseconds, then deleted). */
export const DEVICE_PROBE_TABLE = 'flowhint_probe_devices';
const FT = 'p';

/** Delete any leftover of an interrupted probe, then create the table and an empty flowtable. */
const CREATE: Transaction = [
  add({ type: 'table' }),
  del({ type: 'table' }),
  add({ type: 'table' }),
  add({ type: 'flowtable', name: FT, devices: [] }),
];
const DROP: Transaction = [del({ type: 'table' })];

const unsupported = (reason: string): ProbeResult => ({ supported: false, reason });

async function devicesNow(nft: Nft): Promise<ReadonlySet<string> | undefined> {
  return (await nft.read(DEVICE_PROBE_TABLE))?.flowtables.get(FT)?.devices;
}

/** Add `device` to a live flowtable and remove it again, checking the kernel's own listing after each. */
export async function probeDeviceUpdate(nft: Nft, device = 'lo'): Promise<ProbeResult> {
  try {
    await nft.apply(CREATE, DEVICE_PROBE_TABLE);
    await nft.apply([add({ type: 'flowtable', name: FT, devices: [device] })], DEVICE_PROBE_TABLE);
    if (!(await devicesNow(nft))?.has(device))
      return unsupported(`adding device ${device} to a live flowtable left it out`);
    await nft.apply([del({ type: 'flowtable', name: FT, devices: [device] })], DEVICE_PROBE_TABLE);
    const after = await devicesNow(nft);
    if (!after) return unsupported(`removing device ${device} deleted the whole flowtable`);
    if (after.has(device)) return unsupported(`removing device ${device} from a live flowtable left it in`);
    return { supported: true, reason: '' };
  } catch (err) {
    return unsupported(errorMessage(err).replace(/^nft transaction failed: /, ''));
  } finally {
    await nft.apply(DROP, DEVICE_PROBE_TABLE).catch(() => undefined);
  }
}

/**
 * What is programmed, and the two ways to change it, both one atomic `nft -f -` each:
 *
 * - `full`: read the table back, compare its content with what the last transaction left
 *   (drift.ts), then one transaction that makes it exactly the target (render.ts's
 *   fullTransaction). A transaction that fails because a flowtable device vanished since it
 *   was listed is retried once, at once, with the devices listed again.
 * - `partial`: only the chains and elements of the Services that changed (diff +
 *   deltaTransaction), and the flowtable's devices in place when they changed.
 *
 * Device changes always go in a transaction of their own, after the Services': a veth that
 * vanished since the last poll (a short-lived Job's pod) fails only that one, which is
 * retried at once with the devices listed again. Service changes never wait for a device:
 * device work stops between its transactions when `yieldTo` says Services are waiting
 * (`devicesPending` then tells the caller to come back for the rest).
 *
 * A failed transaction changes nothing (nft transactions are atomic), so `applied` is
 * updated only after one succeeds.
 */
import type { Logger } from 'pino';
import { errorMessage } from '../../lib/errors.ts';
import { emptyState, type DesiredState } from '../state/desired.ts';
import { addedLong, diff, isEmptyDelta } from '../state/delta.ts';
import { drift } from './drift.ts';
import type { Nft } from './nft.ts';
import { FLOWTABLE, shapeOf, type RenderOptions } from './names.ts';
import type { NodeTimeouts } from '../state/timeout-policy.ts';
import type { LongElement } from '../state/desired.ts';
import { deviceOps, oneDeviceOps } from './flowtable.ts';
import { DELETE_TABLE, deltaTransaction, fullTransaction, marksAlready, recreateFlowtable } from './render.ts';

/** What is programmed: the state, and how it was rendered (support, devices, flags). */
export interface Applied {
  readonly state: DesiredState;
  readonly options: RenderOptions;
}

export interface ProgrammerOptions {
  nft: Nft;
  log: Logger;
  /** The counters this class adds to (the agent's metrics have them). */
  metrics: { driftRepairs: { inc(): void }; devicesMissing: { inc(n?: number): void } };
  /** What the kernel supports now (host/node-support.ts keeps it current). */
  support: {
    readonly flowtable: boolean;
    /** The kernel changes a live flowtable's devices (false: each change recreates it; host/device-probe.ts). */
    readonly deviceUpdate?: boolean | undefined;
    readonly ctTimeout: boolean;
    readonly nodeTimeouts?: NodeTimeouts | undefined;
  };
  /** The flowtable `counter` flag, and the conntrack mark bit (render.ts's default if absent). */
  counter: boolean;
  ctMark?: number | undefined;
  shortMark?: number | undefined;
  /** Whether device work should stop at its next transaction (Service changes are waiting). */
  yieldTo?: () => boolean;
}

export class Programmer {
  private readonly o: ProgrammerOptions;
  /** What the last successful transaction programmed; undefined before the first. */
  applied: Applied | undefined;
  /** The LongLived elements the last successful sync added (host/live-marks.ts marks their live connections). */
  addedLong: readonly LongElement[] = [];
  /** The last sync stopped its device work early to let Service changes through (yieldTo). */
  devicesPending = false;

  constructor(o: ProgrammerOptions) {
    this.o = o;
  }

  /** How to render with these flowtable devices now. */
  render(devices: readonly string[]): RenderOptions {
    const { support, counter, ctMark, shortMark } = this.o;
    const flags = {
      counter,
      ...(ctMark === undefined ? {} : { ctMark }),
      ...(shortMark === undefined ? {} : { shortMark }),
    };
    const node = support.nodeTimeouts ? { nodeTimeouts: support.nodeTimeouts } : {};
    return { flowtable: support.flowtable, ctTimeout: support.ctTimeout, devices, ...node, ...flags };
  }

  /** The flowtable's devices as last programmed. */
  get devices(): readonly string[] {
    return this.applied?.options.devices ?? [];
  }

  /**
   * Make the table exactly `target`, with the devices `listDevices` gives (none when the
   * flowtable is not supported). Returns whether the table had drifted.
   */
  async full(target: DesiredState, listDevices: () => Promise<string[]>): Promise<boolean> {
    const { nft, log, metrics } = this.o;
    this.devicesPending = false;
    const flowtable = this.o.support.flowtable;
    const render = (devices: readonly string[]) => this.render(devices);
    let devices = flowtable ? await listDevices() : [];
    const current = await nft.read();
    // Drift: the table is not what our last transaction left (someone edited or deleted it).
    const differences = this.applied ? drift(current, this.applied.state, this.applied.options) : [];
    if (differences.length > 0) {
      metrics.driftRepairs.inc();
      const count = differences.length;
      log.warn(
        { differences: differences.slice(0, 5), count },
        'table differs from what flowhint last programmed (drift); repairing',
      );
    }
    // The Services' transaction never names a device it did not find in the kernel: an
    // existing flowtable keeps the devices it has, a new one is created with none (before
    // Linux 5.8, which cannot add them later, with the devices listed). Device changes follow
    // in a transaction of their own (inPlace), which churn can never fail.
    const long = flowtable && shapeOf(target).long;
    const existing = long ? current?.flowtables.get(FLOWTABLE)?.devices : undefined;
    const inPlace = this.o.support.deviceUpdate !== false;
    const first = existing ? [...existing] : inPlace ? [] : devices;
    try {
      await nft.apply(fullTransaction(target, render(first), current));
    } catch (err) {
      if (!flowtable || existing || inPlace) throw err;
      // Creating the flowtable: a device named may have vanished since listing: prune, retry once.
      const again = await listDevices();
      if (again.join(',') === devices.join(',')) throw err;
      this.vanished(devices, again);
      devices = again;
      await nft.apply(fullTransaction(target, render(devices), await nft.read()));
    }
    // New to the kernel, not to this process: after a restart, the table found has marked
    // new connections all along, and its live ones are marked already.
    this.addedLong = addedLong(undefined, target).filter((e) => !marksAlready(current, e));
    this.applied = { state: target, options: render(existing || inPlace ? first : devices) };
    // What the flowtable holds now is known (the transaction just made it so): no read back.
    if (long) await this.inPlace(devices, listDevices, first);
    return differences.length > 0;
  }

  /**
   * The flowtable's devices to `wanted`, in place, in a transaction of their own. A device
   * that vanished since it was listed fails it: list again, then one transaction per device,
   * so a vanished one fails only its own. Never fails the sync: what did not apply is
   * retried by the next host poll, which sees the flowtable differ from the node's devices.
   * `held`: what the flowtable holds, when the caller knows it (else it is read back).
   */
  private async inPlace(
    wanted: readonly string[],
    listDevices: () => Promise<string[]>,
    held?: readonly string[],
  ): Promise<void> {
    const { nft, log } = this.o;
    const applied = this.applied;
    this.devicesPending = false;
    if (!applied) return;
    const before = applied.options.devices;
    // Before Linux 6.16 the kernel drops a deleted device from the flowtable by itself; from
    // 6.16 (hooks by interface name) it keeps the name until deleted: start from what it holds.
    const inKernel = async () => (await nft.readInet())?.flowtables.get(FLOWTABLE)?.devices ?? before;
    let devices = wanted;
    // Without in-place device changes (before Linux 5.8), the flowtable is made again with them.
    const recreate = this.o.support.deviceUpdate === false;
    const opsFor = async (d: readonly string[], known?: readonly string[]) => {
      const ops = deviceOps(known ?? (await inKernel()), d);
      return recreate && ops.length > 0
        ? recreateFlowtable({ ...applied.options, devices: d }, applied.state.chains)
        : ops;
    };
    const ops = await opsFor(devices, held);
    if (ops.length === 0 && devices.join(',') === before.join(',')) return;
    if (this.yielded()) return;
    try {
      if (ops.length > 0) await nft.apply(ops);
    } catch (err) {
      if (this.yielded()) return;
      const again = await listDevices();
      if (recreate && again.join(',') === devices.join(',')) throw err;
      if (again.join(',') !== devices.join(',')) this.vanished(devices, again);
      devices = again;
      if (recreate) await nft.apply(await opsFor(devices));
      else devices = await this.oneByOne(devices, inKernel, err);
    }
    this.applied = { state: applied.state, options: { ...applied.options, devices } };
    const added = devices.filter((d) => !before.includes(d));
    const removed = before.filter((d) => !devices.includes(d));
    log.info(
      { added, removed },
      recreate ? 'flowtable recreated with new devices' : 'flowtable devices updated in place',
    );
  }

  /** Each device change in a transaction of its own; returns the devices the flowtable holds after. */
  private async oneByOne(
    wanted: readonly string[],
    inKernel: () => Promise<Iterable<string>>,
    first: unknown,
  ): Promise<string[]> {
    const failed: string[] = [];
    let err = errorMessage(first);
    for (const op of oneDeviceOps(await inKernel(), wanted)) {
      if (this.yielded()) break;
      await this.o.nft.apply([op]).catch((e: unknown) => {
        err = errorMessage(e);
        failed.push(...(op.obj.type === 'flowtable' ? (op.obj.devices ?? []) : []));
      });
    }
    if (failed.length > 0) {
      this.o.metrics.devicesMissing.inc(failed.length);
      this.o.log.warn(
        { devices: failed, err },
        'flowtable device changes failed (vanished devices); the next host poll retries',
      );
    }
    // What the kernel holds: the wanted ones it took, then any it kept that a failed removal left.
    const now = [...(await inKernel())];
    return [...wanted.filter((d) => now.includes(d)), ...now.filter((d) => !wanted.includes(d)).sort()];
  }

  /** Whether device work stops here for waiting Service changes; notes it in devicesPending. */
  private yielded(): boolean {
    if (this.o.yieldTo?.() === true) this.devicesPending = true;
    return this.devicesPending;
  }

  /** Devices listed for a transaction that were gone by the time it ran. */
  private vanished(listed: readonly string[], now: readonly string[]): void {
    this.o.metrics.devicesMissing.inc(listed.filter((d) => !now.includes(d)).length);
    this.o.log.warn({ before: listed, now }, 'devices changed during the sync; retrying once with the current list');
  }

  /**
   * The Services `keys` as in `target`; then, in a transaction of its own, the flowtable's
   * devices if `devices` is given (`listDevices` lists them again if one vanished).
   */
  async partial(
    target: DesiredState,
    keys: ReadonlySet<string>,
    devices: readonly string[] | undefined,
    listDevices: () => Promise<string[]> = async () => [...(devices ?? [])],
  ): Promise<undefined> {
    this.devicesPending = false;
    const before = this.devices;
    // The node's timeouts as programmed: a change of them waits for the full sync it asked for
    // (a partial sync deletes ct timeout objects by the names they were created with).
    const programmed = this.applied?.options.nodeTimeouts;
    const options = { ...this.render(before), ...(programmed ? { nodeTimeouts: programmed } : {}) };
    const delta = diff(this.applied?.state ?? emptyState(), target, keys);
    // A LongLived port removed: the flowtable is recreated with the devices it has now (the
    // kernel drops a deleted device by itself), which evicts the removed hint's flows.
    const evict = delta.removeLong.length > 0 && options.flowtable && shapeOf(target).long;
    const inKernel = evict ? (await this.o.nft.readInet())?.flowtables.get(FLOWTABLE)?.devices : undefined;
    const now = inKernel ? { ...options, devices: [...inKernel] } : options;
    if (!isEmptyDelta(delta)) await this.o.nft.apply(deltaTransaction(delta, now, evict ? target.chains : undefined));
    this.addedLong = delta.addLong;
    this.applied = { state: target, options: now };
    // The flowtable exists only while a LongLived Service does (a partial sync keeps the shape).
    if (devices && shapeOf(target).long) await this.inPlace(devices, listDevices);
    return undefined;
  }

  /** Delete the table (`--cleanup-on-exit`, `flowhint cleanup`). */
  async remove(): Promise<void> {
    await this.o.nft.apply(DELETE_TABLE);
  }
}

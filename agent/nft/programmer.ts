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
 * A failed transaction changes nothing (nft transactions are atomic), so `applied` is
 * updated only after one succeeds.
 */
import type { Logger } from 'pino';
import { emptyState, type DesiredState } from '../state/desired.ts';
import { diff, isEmptyDelta } from '../state/delta.ts';
import { drift } from './drift.ts';
import type { Nft } from './nft.ts';
import { FLOWTABLE, shapeOf, type RenderOptions } from './names.ts';
import { deviceOps } from './flowtable.ts';
import { DELETE_TABLE, deltaTransaction, fullTransaction } from './render.ts';

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
  support: { readonly flowtable: boolean; readonly ctTimeout: boolean };
  /** The flowtable `counter` flag, and the conntrack mark bit (render.ts's default if absent). */
  counter: boolean;
  ctMark?: number | undefined;
  shortMark?: number | undefined;
}

export class Programmer {
  private readonly o: ProgrammerOptions;
  /** What the last successful transaction programmed; undefined before the first. */
  applied: Applied | undefined;

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
    return { flowtable: support.flowtable, ctTimeout: support.ctTimeout, devices, ...flags };
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
    try {
      await nft.apply(fullTransaction(target, render(devices), current));
    } catch (err) {
      if (!flowtable) throw err;
      // A device named in the transaction may have vanished since listing: prune, retry once.
      const again = await listDevices();
      if (again.join(',') === devices.join(',')) throw err;
      metrics.devicesMissing.inc(devices.filter((d) => !again.includes(d)).length);
      log.warn({ before: devices, now: again }, 'devices changed during the sync; retrying once with the current list');
      devices = again;
      await nft.apply(fullTransaction(target, render(devices), await nft.read()));
    }
    this.applied = { state: target, options: render(devices) };
    return differences.length > 0;
  }

  /** The Services `keys` as in `target`, and the flowtable's devices if `devices` is given. */
  async partial(
    target: DesiredState,
    keys: ReadonlySet<string>,
    devices: readonly string[] | undefined,
  ): Promise<undefined> {
    const { nft, log } = this.o;
    const before = this.devices;
    // The flowtable exists only while a LongLived Service does (a partial sync keeps the shape).
    const ft = devices && shapeOf(target).long;
    // The kernel drops a deleted device from the flowtable by itself: start from what it holds now.
    const inKernel = ft ? ((await nft.read())?.flowtables.get(FLOWTABLE)?.devices ?? before) : [];
    const options = this.render(devices ?? before);
    const delta = diff(this.applied?.state ?? emptyState(), target, keys);
    const elements = isEmptyDelta(delta) ? [] : deltaTransaction(delta, options);
    await nft.apply([...(ft ? deviceOps(inKernel, devices) : []), ...elements]);
    if (ft) {
      const added = devices.filter((d) => !before.includes(d));
      log.info({ added, removed: before.filter((d) => !devices.includes(d)) }, 'flowtable devices updated in place');
    }
    this.applied = { state: target, options };
    return undefined;
  }

  /** Delete the table (`--cleanup-on-exit`, `flowhint cleanup`). */
  async remove(): Promise<void> {
    await this.o.nft.apply(DELETE_TABLE);
  }
}

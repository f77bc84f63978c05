/**
 * What the agent polls on its host: the flowtable's devices (warning once per change about
 * names that cannot be rendered safely) and the node's own addresses for NodePorts (fixed
 * by `--node-address`, or read from the host).
 */
import type { Logger } from 'pino';
import type { Conditions } from '../../lib/conditions.ts';
import { realClock, type Clock } from '../../lib/clock.ts';
import type { Runner } from '../../lib/exec.ts';
import { addressKey, type Address } from '../state/address.ts';
import { listLinks, listNodeAddresses, selectDevices, type DeviceFilter } from './devices.ts';
import { DeviceSettle } from './device-settle.ts';

export interface HostPollOptions {
  run: Runner;
  devices: DeviceFilter;
  /** Fixed node addresses (`--node-address`); default: this node's global addresses. */
  nodeAddresses?: readonly Address[] | undefined;
  log: Logger;
  conditions: Conditions;
  /** How long a new device must stay up before it joins the flowtable (device-settle.ts's default if absent). */
  deviceSettleMs?: number | undefined;
  /** Time, for settling; the real clock if absent. */
  clock?: Clock | undefined;
}

export interface HostChanges {
  addresses?: readonly Address[];
  devices?: string[];
}

export class HostPoll {
  private readonly o: HostPollOptions;
  private readonly settle: DeviceSettle;

  constructor(o: HostPollOptions) {
    this.o = o;
    this.settle = new DeviceSettle(o.deviceSettleMs);
  }

  /** The devices the flowtable should hold now: those selected that have settled (device-settle.ts). */
  async devices(): Promise<string[]> {
    const { devices, skipped } = selectDevices(await listLinks(this.o.run), this.o.devices);
    if (this.o.conditions.changed('unrenderable-devices', skipped.join(',')) && skipped.length > 0) {
      this.o.log.warn({ devices: skipped }, 'device names cannot be rendered safely; not added to the flowtable');
    }
    return this.settle.settled(devices, (this.o.clock ?? realClock).now());
  }

  /**
   * What changed since `now`: the node's addresses, and the flowtable's devices (only when
   * `now.devices` is given, i.e. the node has flowtables).
   */
  async changes(now: { addresses: readonly Address[]; devices?: readonly string[] | undefined }): Promise<HostChanges> {
    const out: HostChanges = {};
    const addresses = await this.addresses();
    if (!sameAddresses(addresses, now.addresses)) {
      this.o.log.info({ nodeAddresses: addresses.map((a) => a.addr) }, 'node addresses changed');
      out.addresses = addresses;
    }
    if (!now.devices) return out;
    const devices = await this.devices();
    if (devices.join(',') !== now.devices.join(',')) out.devices = devices;
    return out;
  }

  /** The node's addresses for NodePorts now. */
  async addresses(): Promise<readonly Address[]> {
    return this.o.nodeAddresses ?? (await listNodeAddresses(this.o.run));
  }
}

/** Whether two lists hold the same addresses, in any order. */
function sameAddresses(a: readonly Address[], b: readonly Address[]): boolean {
  const text = (l: readonly Address[]) => l.map(addressKey).sort().join(',');
  return text(a) === text(b);
}

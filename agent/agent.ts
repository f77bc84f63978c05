/**
 * The node agent's controller: sources in, one nft transaction at a time out.
 *
 * - Every Service from a source is re-checked with the api/ reader; an unusable one is not
 *   programmed, is warned about once (per reason), and is counted.
 * - The first sync, any sync after a failure, a kernel upgrade and the periodic resync are
 *   *full*: read the table back, compare its content with what the last transaction left
 *   (drift.ts), then one atomic transaction that makes it exactly the desired state
 *   (fullTransaction). Others are *partial*: only the chains and elements of the Services
 *   that changed (diff + deltaTransaction). Bursts are batched by a short rate limit.
 * - A failed transaction leaves the previous ruleset intact (nft transactions are atomic);
 *   it is retried with backoff, and the retry is full. A transaction that failed because a
 *   device vanished is retried once at once after re-listing devices.
 * - Host polling feeds changes into the same sync: new node addresses re-address NodePorts;
 *   new or gone devices are added to or removed from the flowtable in place (a `devices`
 *   sync, or part of a partial one).
 *
 * What makes a sync full, in one place: `needFull`, set by the first sync, a failure, the
 * periodic resync and a kernel that gained flowtable or ct timeout support; and a change of
 * the table's shape (the first or last Service of a hint: render.ts's base chains).
 * - Restart is idempotent: the flowtable is only touched to add or remove devices, so
 *   connections already offloaded stay offloaded.
 */
import type { Logger } from 'pino';
import { readHint } from '../api/index.ts';
import { errorMessage } from '../lib/errors.ts';
import type { Runner } from '../lib/exec.ts';
import type { Address } from './state/address.ts';
import { addressKey } from './state/address.ts';
import { diff, emptyState, isEmptyDelta, serviceEntry, withNodeAddresses, withServices, type DesiredState, type ServiceEntry } from './state/desired.ts';
import { listLinks, listNodeAddresses, selectDevices, type DeviceFilter } from './host/devices.ts';
import type { AgentMetrics } from './report/metrics.ts';
import { drift } from './nft/drift.ts';
import { NftError, type Nft } from './nft/nft.ts';
import { NodeSupport } from './host/node-support.ts';
import { FAMILY, TABLE } from './nft/transaction.ts';
import { DELETE_TABLE, FLOWTABLE, deltaTransaction, deviceOps, fullTransaction, sameShape, shapeOf, type RenderOptions } from './nft/render.ts';
import type { Source, SourceEvent } from './sources/source.ts';
import { servicesStatus, type StatusDoc } from './report/status.ts';
import { StatusWriter } from './report/status-writer.ts';
import { Observer } from './report/observe.ts';
import { Backoff } from '../lib/backoff.ts';
import { BoundedRunner } from '../lib/bounded-runner.ts';
import { Conditions } from '../lib/conditions.ts';

const STATUS_INTERVAL_MS = 500;

export interface AgentOptions {
  run: Runner;
  nft: Nft;
  source: Source;
  logger: Logger;
  metrics: AgentMetrics;
  defaultThreshold: number;
  /** ShortLived Services without their own conntrack-timeout: seconds (`--short-lived-timeout`). */
  defaultTimeout?: number;
  devices: DeviceFilter;
  /** Fixed node addresses for NodePorts; default: this node's global addresses. */
  nodeAddresses?: Address[] | undefined;
  /** The flowtable `counter` flag. */
  counter: boolean;
  /** The conntrack mark bit for LongLived connections (`--ct-mark-bit`); render.ts's default if absent. */
  ctMark?: number;
  stateDir?: string | undefined;
  resyncMs?: number;
  minSyncIntervalMs?: number;
  devicePollMs?: number;
  reprobeMs?: number;
  conntrackPollMs?: number;
  backoff?: { initialMs: number; maxMs: number };
}

export type SyncKind = 'full' | 'partial' | 'devices';

export interface SyncResult {
  kind: SyncKind;
  ok: boolean;
  durationMs: number;
  error?: string;
  /** Full syncs: whether the table differed from what the last transaction left (drift). */
  drift?: boolean;
}

export class Agent {
  private readonly o: AgentOptions;
  private readonly log: Logger;
  private desired: DesiredState = emptyState();
  private applied: DesiredState | undefined;
  /** How `applied` was rendered (flowtable and ct timeout support then), for drift. */
  private appliedOptions: RenderOptions | undefined;
  private appliedDevices: string[] = [];
  /** Devices the host poll found, when they differ from `appliedDevices`. */
  private wantDevices: string[] | undefined;
  private dirty = new Set<string>();
  private needFull = true;
  private invalid = new Map<string, { code: string; reason: string }>();
  /** Node-level conditions already logged (degraded, accounting, devices, status file). */
  private readonly conditions = new Conditions();
  /**
   * Per Service key, the refusal last reported (`code|reason`): a Service is reported again
   * when its refusal changes, or when it is refused again after being fixed or deleted. Holds
   * only Services refused now, so it does not grow with churn.
   */
  private reportedInvalid = new Map<string, string>();
  private readonly node: NodeSupport;
  private readonly observer: Observer;
  private readonly runner: BoundedRunner;
  private readonly status: StatusWriter;
  private timers: NodeJS.Timeout[] = [];
  private failures = 0;
  private stopped = false;
  private syncedOnce: Promise<void>;
  private resolveSynced!: () => void;
  lastSync: SyncResult | undefined;
  lastSyncTime: string | undefined;

  constructor(o: AgentOptions) {
    this.o = o;
    this.log = o.logger;
    this.syncedOnce = new Promise((r) => (this.resolveSynced = r));
    this.node = new NodeSupport({ run: o.run, nft: o.nft, metrics: o.metrics, log: o.logger, conditions: this.conditions, upgrade: () => this.requestFull(), programmed: () => this.applied !== undefined });
    this.observer = new Observer({ run: o.run, nft: o.nft, metrics: o.metrics, log: o.logger, changed: () => this.status.soon() });
    this.runner = new BoundedRunner({
      minIntervalMs: o.minSyncIntervalMs ?? 100,
      backoff: new Backoff(o.backoff ?? { initialMs: 1_000, maxMs: 60_000 }),
      run: async () => this.stopped || (await this.sync()).ok,
    });
    this.status = new StatusWriter({
      dir: o.stateDir,
      intervalMs: STATUS_INTERVAL_MS,
      doc: () => this.statusDoc(),
      onSuccess: () => this.conditions.changed('status-file', 'ok'),
      onError: (err, dir) => {
        if (this.conditions.changed('status-file', 'failing')) this.log.warn({ err: errorMessage(err), dir }, 'cannot write status file; `flowhint status` will not see this agent');
      },
    });
  }

  get flowtableSupported(): boolean {
    return this.node.flowtable;
  }

  get ctTimeoutSupported(): boolean {
    return this.node.ctTimeout;
  }

  get state(): DesiredState {
    return this.desired;
  }

  /** Probe, read devices and addresses, start the source; resolves when it has synced. */
  async prepare(): Promise<void> {
    await this.node.probeFlowtable();
    await this.node.probeTimeouts();
    await this.node.ensureAccounting();
    this.desired = withNodeAddresses(this.desired, this.o.nodeAddresses ?? (await listNodeAddresses(this.o.run)));
    this.appliedDevices = [];
    await this.o.source.start({
      events: (events) => this.onEvents(events),
      synced: () => this.resolveSynced(),
      refused: (key, refusal) => this.onRefused(key, refusal),
    });
    await this.syncedOnce;
  }

  /** Run: the sync loop, periodic resync, host polling, re-probe, conntrack metrics. */
  startLoops(): void {
    const every = (ms: number, fn: () => Promise<void>) => {
      const t = setInterval(() => void fn().catch((err) => this.log.error({ err: errorMessage(err) }, 'periodic task failed')), ms);
      this.timers.push(t);
    };
    every(this.o.resyncMs ?? 3_600_000, async () => this.requestFull());
    every(this.o.devicePollMs ?? 2_000, () => this.pollHost());
    every(this.o.reprobeMs ?? 60_000, () => this.node.reprobe());
    every(this.o.conntrackPollMs ?? 15_000, async () => {
      await this.refreshOffloadMetrics();
    });
    this.runner.start();
    this.runner.request();
  }

  /** The next sync is full (the periodic resync; tests). */
  requestFull(): void {
    this.needFull = true;
    this.runner.request();
  }

  async stop(options: { cleanup?: boolean } = {}): Promise<void> {
    this.stopped = true;
    for (const t of this.timers) clearInterval(t);
    await this.o.source.stop();
    await this.runner.stop();
    await this.status.flush();
    if (options.cleanup) {
      await this.o.nft.apply(DELETE_TABLE).catch((err) => this.log.warn({ err: errorMessage(err) }, 'cleanup: delete table failed'));
      this.log.info({ table: `${FAMILY} ${TABLE}` }, 'table removed (--cleanup-on-exit)');
    } else {
      this.log.info('stopped; rules left in place so offloaded connections continue');
    }
  }

  /** A refusal by the source itself: same bookkeeping as one by the reader. */
  private onRefused(key: string, refusal: { code: string; reason: string } | undefined): void {
    if (!refusal) {
      this.clearInvalid(key);
    } else {
      this.noteInvalid(key, refusal.code, refusal.reason);
    }
    this.status.soon();
  }

  private noteInvalid(key: string, code: string, reason: string): void {
    const report = `${code}|${reason}`;
    if (this.reportedInvalid.get(key) !== report) {
      this.reportedInvalid.set(key, report);
      this.o.metrics.invalidHints.inc({ code });
      this.log.warn({ service: key, code, reason }, 'hint not usable; Service not programmed');
    }
    this.invalid.set(key, { code, reason });
  }

  /** The Service is usable, unhinted or gone: forget its refusal. */
  private clearInvalid(key: string): void {
    this.invalid.delete(key);
    this.reportedInvalid.delete(key);
  }

  private onEvents(events: readonly SourceEvent[]): void {
    const updates = new Map<string, ServiceEntry | undefined>();
    for (const ev of events) {
      if (ev.type === 'delete') {
        updates.set(ev.key, undefined);
        this.clearInvalid(ev.key);
        continue;
      }
      const r = readHint(ev.object);
      if (r.usable) {
        updates.set(ev.key, serviceEntry(r.hint, this.o.defaultThreshold, this.o.defaultTimeout));
        this.clearInvalid(ev.key);
      } else {
        updates.set(ev.key, undefined);
        if (r.code === 'FH_NOT_HINTED') {
          this.clearInvalid(ev.key);
          continue;
        }
        this.noteInvalid(ev.key, r.code, r.reason);
      }
    }
    if (updates.size === 0) return;
    this.desired = withServices(this.desired, updates);
    for (const key of updates.keys()) this.dirty.add(key);
    this.o.metrics.hintedServices.set(this.desired.services.size);
    this.runner.request();
  }

  private async currentDevices(): Promise<string[]> {
    const { devices, skipped } = selectDevices(await listLinks(this.o.run), this.o.devices);
    if (this.conditions.changed('unrenderable-devices', skipped.join(',')) && skipped.length > 0) {
      this.log.warn({ devices: skipped }, 'device names cannot be rendered safely; not added to the flowtable');
    }
    return devices;
  }

  private renderOptions(devices: readonly string[]): RenderOptions {
    return { flowtable: this.node.flowtable, devices, counter: this.o.counter, ctTimeout: this.node.ctTimeout, ...(this.o.ctMark === undefined ? {} : { ctMark: this.o.ctMark }) };
  }

  private devicesChanged(): boolean {
    return this.wantDevices !== undefined && this.wantDevices.join(',') !== this.appliedDevices.join(',');
  }

  /** One sync, now: full, partial, or flowtable devices only. Exposed for --once and tests. */
  async sync(): Promise<SyncResult> {
    const started = performance.now();
    const full = this.needFull || !this.applied || !sameShape(shapeOf(this.applied), shapeOf(this.desired));
    const kind: SyncKind = full ? 'full' : this.dirty.size === 0 && this.devicesChanged() ? 'devices' : 'partial';
    const target = this.desired;
    const keys = this.dirty;
    this.dirty = new Set();
    let result: SyncResult;
    try {
      const drift = kind === 'full' ? await this.applyFull(target) : await this.applyIncremental(target, keys);
      this.applied = target;
      this.needFull = false;
      this.failures = 0;
      result = { kind, ok: true, durationMs: performance.now() - started, ...(drift === undefined ? {} : { drift }) };
      // Status shows locally delivered ports (IPVS) from the first sync on, not 15 s later.
      if (kind === 'full') await this.observer.localDelivery(target).catch((err) => this.log.warn({ err: errorMessage(err) }, 'cannot read IPVS services and local addresses'));
      if (!this.node.acct.enabled) await this.node.ensureAccounting();
    } catch (err) {
      for (const key of keys) this.dirty.add(key);
      this.needFull = true;
      this.failures += 1;
      this.o.metrics.syncFailures.inc({ kind });
      // A device update that fails most likely met a device that vanished again.
      if (kind === 'devices') this.o.metrics.devicesMissing.inc();
      const message = errorMessage(err);
      result = { kind, ok: false, durationMs: performance.now() - started, error: message };
      this.log.error({ kind, err: message, stderr: err instanceof NftError ? err.stderr.slice(0, 2000) : undefined, failures: this.failures }, 'sync failed; previous ruleset kept; retrying as a full sync');
    }
    this.o.metrics.syncDuration.observe({ kind }, result.durationMs / 1000);
    this.lastSync = result;
    this.lastSyncTime = new Date().toISOString();
    this.o.metrics.programmedElements.set(this.applied?.chainOf.size ?? 0);
    this.o.metrics.devices.set(this.appliedDevices.length);
    if (result.ok) this.log.info({ kind, durationMs: Math.round(result.durationMs * 10) / 10, services: target.services.size, drift: result.drift }, 'synced');
    this.status.soon();
    return result;
  }

  private async applyFull(target: DesiredState): Promise<boolean> {
    let devices = this.node.flowtable ? await this.currentDevices() : [];
    const current = await this.o.nft.read();
    // Drift: the table is not what our last transaction left (someone edited or deleted it).
    const differences = this.applied && this.appliedOptions ? drift(current, this.applied, { ...this.appliedOptions, devices: this.appliedDevices }) : [];
    if (differences.length > 0) {
      this.o.metrics.driftRepairs.inc();
      this.log.warn({ differences: differences.slice(0, 5), count: differences.length }, 'table differs from what flowhint last programmed (drift); repairing');
    }
    try {
      await this.o.nft.apply(fullTransaction(target, this.renderOptions(devices), current));
    } catch (err) {
      if (!this.node.flowtable) throw err;
      // A device named in the transaction may have vanished since listing: prune, retry once.
      const again = await this.currentDevices();
      if (again.join(',') === devices.join(',')) throw err;
      this.o.metrics.devicesMissing.inc(devices.filter((d) => !again.includes(d)).length);
      this.log.warn({ before: devices, now: again }, 'devices changed during the sync; retrying once with the current list');
      devices = again;
      await this.o.nft.apply(fullTransaction(target, this.renderOptions(devices), await this.o.nft.read()));
    }
    this.appliedDevices = devices;
    this.wantDevices = undefined;
    this.appliedOptions = this.renderOptions(devices);
    return differences.length > 0;
  }

  /** The Services that changed, and the flowtable's devices if the host poll saw a change. */
  private async applyIncremental(target: DesiredState, keys: Set<string>): Promise<undefined> {
    const devices = this.node.flowtable && this.devicesChanged() ? this.wantDevices : undefined;
    // The flowtable exists only while a LongLived Service does (render.ts; a partial sync keeps the shape).
    const ft = devices && shapeOf(target).long;
    // The kernel drops a deleted device from the flowtable by itself: start from what it holds now.
    const inKernel = ft ? ((await this.o.nft.read())?.flowtables.get(FLOWTABLE)?.devices ?? this.appliedDevices) : [];
    const options = this.renderOptions(devices ?? this.appliedDevices);
    const delta = diff(this.applied ?? emptyState(), target, keys);
    const tx = [...(ft ? deviceOps(inKernel, devices) : []), ...(isEmptyDelta(delta) ? [] : deltaTransaction(delta, options))];
    await this.o.nft.apply(tx);
    if (devices) {
      if (ft) this.log.info({ added: devices.filter((d) => !this.appliedDevices.includes(d)), removed: this.appliedDevices.filter((d) => !devices.includes(d)) }, 'flowtable devices updated in place');
      this.appliedDevices = devices;
    }
    this.wantDevices = undefined;
    this.appliedOptions = options;
    return undefined;
  }

  /** Devices and node addresses: a change becomes a sync (devices in place; NodePorts re-addressed). */
  private async pollHost(): Promise<void> {
    if (this.stopped || !this.applied) return;
    if (!this.o.nodeAddresses) {
      const addrs = await listNodeAddresses(this.o.run);
      const now = addrs.map(addressKey).sort().join(',');
      if (now !== this.desired.nodeAddresses.map(addressKey).join(',')) {
        this.log.info({ nodeAddresses: addrs.map((a) => a.addr) }, 'node addresses changed');
        this.desired = withNodeAddresses(this.desired, addrs);
        this.runner.request();
      }
    }
    if (!this.node.flowtable) return;
    const devices = await this.currentDevices();
    if (devices.join(',') === this.appliedDevices.join(',')) return;
    this.wantDevices = devices;
    this.runner.request();
  }

  async refreshOffloadMetrics(): Promise<Map<string, number> | undefined> {
    if (!this.applied) return undefined;
    return this.observer.refresh(this.applied, this.appliedDevices);
  }

  statusDoc(): StatusDoc {
    const state = this.applied ?? emptyState();
    return {
      version: 1,
      pid: process.pid,
      updatedAt: new Date().toISOString(),
      node: {
        mode: this.node.flowtable ? 'supported' : 'degraded',
        detail: this.node.flowtableDetail,
        conntrackTimeout: { supported: this.node.ctTimeout, detail: this.node.ctTimeoutDetail },
        conntrackAccounting: this.node.acct,
        nodeAddresses: this.desired.nodeAddresses.map((a) => a.addr),
      },
      table: `${FAMILY} ${TABLE}`,
      devices: this.appliedDevices,
      otherFlowtables: this.observer.others.map((f) => ({ ...f, devices: [...f.devices] })),
      services: servicesStatus(state, this.observer.bypassed),
      invalid: [...this.invalid].sort(([a], [b]) => a.localeCompare(b)).map(([service, v]) => ({ service, ...v })),
      lastSync: this.lastSync && this.lastSyncTime
        ? { at: this.lastSyncTime, kind: this.lastSync.kind, ok: this.lastSync.ok, durationMs: Math.round(this.lastSync.durationMs * 10) / 10, ...(this.lastSync.error ? { error: this.lastSync.error } : {}) }
        : null,
    };
  }
}

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
 * - Restart is idempotent: the flowtable is only touched to add or remove devices, so
 *   connections already offloaded stay offloaded.
 */
import type { Logger } from 'pino';
import { readHint } from '../api/index.ts';
import { errorMessage } from '../lib/errors.ts';
import type { Runner } from '../lib/exec.ts';
import type { Address } from './address.ts';
import { addressKey } from './address.ts';
import { countByService, entriesByService, readConntrack } from './conntrack.ts';
import { diff, emptyState, isEmptyDelta, serviceEntry, withNodeAddresses, withServices, type DesiredState, type ServiceEntry } from './desired.ts';
import { listLinks, listNodeAddresses, selectDevices, type DeviceFilter } from './devices.ts';
import { BYPASS_DETAIL, bypassText, localDelivery, readLocalDelivery, type Bypass } from './local-delivery.ts';
import { OTHER_FLOWTABLE_DETAIL, flowtableText, otherFlowtables, readFlowtables, type Flowtable } from './other-flowtables.ts';
import type { AgentMetrics } from './metrics.ts';
import { drift } from './drift.ts';
import { NftError, type Nft } from './nft.ts';
import { ensureConntrackAccounting, probeCtTimeout, probeFlowtable, type AcctResult } from './probe.ts';
import { DELETE_TABLE, FAMILY, FLOWTABLE, SEEN, TABLE, deltaTransaction, deviceOps, fullTransaction, type RenderOptions } from './render.ts';
import type { Source, SourceEvent } from './sources/source.ts';
import { servicesStatus, writeStatus, type StatusDoc } from './status.ts';

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
  /** Full syncs: whether the table differed from the desired state before. */
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
  private dirty = new Set<string>();
  private needFull = true;
  private supported = false;
  private probeDetail = '';
  private ctTimeout = false;
  private ctTimeoutDetail = '';
  private acct: AcctResult = { enabled: false, detail: 'not checked yet' };
  private invalid = new Map<string, { code: string; reason: string }>();
  /** Node-level conditions already logged (degraded, accounting, devices, status file). */
  private warned = new Set<string>();
  /**
   * Per Service key, the refusal last reported (`code|reason`): a Service is reported again
   * when its refusal changes, or when it is refused again after being fixed or deleted. Holds
   * only Services refused now, so it does not grow with churn.
   */
  private reportedInvalid = new Map<string, string>();
  private keyToId = new Map<string, string>();
  /** Per Service key: ports delivered locally (IPVS, a local address), never offloaded. */
  private bypassed = new Map<string, Bypass[]>();
  /** Other owners' flowtables on our devices (kindnet, Calico, hand-written). */
  private others: Flowtable[] = [];
  private timers: NodeJS.Timeout[] = [];
  private syncTimer: NodeJS.Timeout | undefined;
  private inflight: Promise<void> = Promise.resolve();
  private lastSyncAt = 0;
  private failures = 0;
  private stopped = false;
  /** Syncs are scheduled only once the loops run; `--once` calls sync() itself. */
  private running = false;
  private statusWrites: Promise<void> = Promise.resolve();
  private statusTimer: NodeJS.Timeout | undefined;
  private lastStatusAt = 0;
  private syncedOnce: Promise<void>;
  private resolveSynced!: () => void;
  lastSync: SyncResult | undefined;
  lastSyncTime: string | undefined;

  constructor(o: AgentOptions) {
    this.o = o;
    this.log = o.logger;
    this.syncedOnce = new Promise((r) => (this.resolveSynced = r));
  }

  get flowtableSupported(): boolean {
    return this.supported;
  }

  get state(): DesiredState {
    return this.desired;
  }

  /** Probe, read devices and addresses, start the source; resolves when it has synced. */
  async prepare(): Promise<void> {
    await this.probe();
    await this.probeTimeouts();
    this.acct = await ensureConntrackAccounting(this.o.run);
    this.reportAcct();
    this.desired = withNodeAddresses(this.desired, this.o.nodeAddresses ?? (await listNodeAddresses(this.o.run)));
    this.appliedDevices = [];
    await this.o.source.start({
      events: (events) => this.onEvents(events),
      synced: () => this.resolveSynced(),
      refused: (key, refusal) => this.onRefused(key, refusal),
    });
    await this.syncedOnce;
  }

  /** Run: periodic resync, device and address polling, re-probe, conntrack metrics. */
  startLoops(): void {
    this.running = true;
    const every = (ms: number, fn: () => Promise<void>) => {
      const t = setInterval(() => void fn().catch((err) => this.log.error({ err: errorMessage(err) }, 'periodic task failed')), ms);
      this.timers.push(t);
    };
    every(this.o.resyncMs ?? 3_600_000, async () => {
      this.needFull = true;
      this.schedule();
    });
    every(this.o.devicePollMs ?? 2_000, () => this.pollHost());
    every(this.o.reprobeMs ?? 60_000, async () => {
      if (!this.supported) await this.probe();
      if (!this.ctTimeout) await this.probeTimeouts();
    });
    every(this.o.conntrackPollMs ?? 15_000, async () => {
      await this.refreshOffloadMetrics();
    });
    this.schedule();
  }

  async stop(options: { cleanup?: boolean } = {}): Promise<void> {
    this.stopped = true;
    for (const t of this.timers) clearInterval(t);
    if (this.syncTimer) clearTimeout(this.syncTimer);
    await this.o.source.stop();
    await this.inflight;
    if (this.statusTimer) clearTimeout(this.statusTimer);
    this.statusTimer = undefined;
    await this.saveStatus();
    if (options.cleanup) {
      await this.o.nft.apply(DELETE_TABLE).catch((err) => this.log.warn({ err: errorMessage(err) }, 'cleanup: delete table failed'));
      this.log.info({ table: `${FAMILY} ${TABLE}` }, 'table removed (--cleanup-on-exit)');
    } else {
      this.log.info('stopped; rules left in place so offloaded connections continue');
    }
  }

  get ctTimeoutSupported(): boolean {
    return this.ctTimeout;
  }

  /** ShortLived needs `ct timeout` objects; without them those Services keep the kernel's timeouts. */
  private async probeTimeouts(): Promise<void> {
    const was = this.ctTimeout;
    const p = await probeCtTimeout(this.o.nft);
    this.ctTimeout = p.supported;
    this.ctTimeoutDetail = p.supported ? 'kernel supports ct timeout objects' : `kernel has no ct timeout support (${p.reason}; needs nft_ct with CONFIG_NF_CONNTRACK_TIMEOUT): ShortLived Services keep the default timeouts`;
    this.o.metrics.conntrackTimeoutSupported.set(p.supported ? 1 : 0);
    if (p.supported && !was && this.applied) {
      this.log.info('ct timeout support appeared; programming ShortLived timeouts');
      this.needFull = true;
      this.schedule();
    } else if (!p.supported && !this.warned.has('ct-timeout')) {
      this.warned.add('ct-timeout');
      this.log.warn({ reason: p.reason }, 'degraded: kernel has no ct timeout support; ShortLived Services keep the default conntrack timeouts');
    }
  }

  private async probe(): Promise<void> {
    const was = this.supported;
    const p = await probeFlowtable(this.o.nft);
    this.supported = p.supported;
    this.probeDetail = p.supported ? 'kernel supports flowtables' : `kernel has no flowtable support (adding a flowtable failed: ${p.reason}; needs nf_flow_table_inet and nft_flow_offload)`;
    this.o.metrics.flowtableSupported.set(p.supported ? 1 : 0);
    if (p.supported && !was && this.applied) {
      this.log.info('flowtable support appeared; upgrading the ruleset in place');
      this.needFull = true;
      this.schedule();
    } else if (!p.supported) {
      if (!this.warned.has('degraded')) {
        this.warned.add('degraded');
        this.log.warn({ reason: p.reason }, 'degraded: kernel has no flowtable support; programming counters only, nothing is offloaded');
      }
    }
  }

  private reportAcct(): void {
    this.o.metrics.conntrackAccounting.set(this.acct.enabled ? 1 : 0);
    const key = `acct:${this.acct.enabled}:${this.acct.detail}`;
    if (this.warned.has(key)) return;
    this.warned.add(key);
    if (this.acct.enabled) this.log.info({ detail: this.acct.detail }, 'conntrack accounting on');
    else this.log.error({ detail: this.acct.detail }, 'conntrack accounting is off: offload-after-packets thresholds cannot pass');
  }

  /** A refusal by the source itself: same bookkeeping as one by the reader. */
  private onRefused(key: string, refusal: { code: string; reason: string } | undefined): void {
    if (!refusal) {
      this.clearInvalid(key);
    } else {
      this.noteInvalid(key, refusal.code, refusal.reason);
    }
    this.saveStatusSoon();
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
      const oldId = this.keyToId.get(ev.key);
      if (ev.type === 'delete') {
        if (oldId) updates.set(oldId, undefined);
        this.keyToId.delete(ev.key);
        this.clearInvalid(ev.key);
        continue;
      }
      const r = readHint(ev.object);
      if (r.usable) {
        const entry = serviceEntry(r.hint, this.o.defaultThreshold, this.o.defaultTimeout);
        if (oldId && oldId !== entry.id) updates.set(oldId, undefined);
        this.keyToId.set(ev.key, entry.id);
        updates.set(entry.id, entry);
        this.clearInvalid(ev.key);
      } else {
        if (oldId) updates.set(oldId, undefined);
        this.keyToId.delete(ev.key);
        if (r.code === 'FH_NOT_HINTED') {
          this.clearInvalid(ev.key);
          continue;
        }
        this.noteInvalid(ev.key, r.code, r.reason);
      }
    }
    if (updates.size === 0) return;
    this.desired = withServices(this.desired, updates);
    for (const id of updates.keys()) this.dirty.add(id);
    this.o.metrics.hintedServices.set(this.desired.services.size);
    this.schedule();
  }

  /** Batch bursts: at most one sync per minSyncIntervalMs, one at a time. */
  private schedule(delayMs?: number): void {
    if (this.stopped || !this.running || this.syncTimer) return;
    const since = Date.now() - this.lastSyncAt;
    const wait = delayMs ?? Math.max(0, (this.o.minSyncIntervalMs ?? 100) - since);
    this.syncTimer = setTimeout(() => {
      this.syncTimer = undefined;
      this.inflight = this.inflight.then(async () => {
        const r = await this.sync();
        if (!r.ok && !this.stopped) {
          const b = this.o.backoff ?? { initialMs: 1_000, maxMs: 60_000 };
          this.schedule(Math.min(b.initialMs * 2 ** (this.failures - 1), b.maxMs));
        } else if (this.dirty.size > 0 || this.needFull) {
          this.schedule();
        }
      });
    }, wait);
  }

  private async currentDevices(): Promise<string[]> {
    const { devices, skipped } = selectDevices(await listLinks(this.o.run), this.o.devices);
    for (const s of skipped) {
      if (!this.warned.has(`dev:${s}`)) {
        this.warned.add(`dev:${s}`);
        this.log.warn({ device: s }, 'device name cannot be rendered safely; not added to the flowtable');
      }
    }
    return devices;
  }

  private renderOptions(devices: readonly string[]): RenderOptions {
    return { flowtable: this.supported, devices, counter: this.o.counter, ctTimeout: this.ctTimeout };
  }

  /** One sync, now: full or partial as needed. Exposed for --once and tests. */
  async sync(): Promise<SyncResult> {
    const started = performance.now();
    const kind: SyncKind = this.needFull || !this.applied ? 'full' : 'partial';
    const target = this.desired;
    const ids = this.dirty;
    this.dirty = new Set();
    let result: SyncResult;
    try {
      const drift = kind === 'full' ? await this.applyFull(target) : await this.applyPartial(target, ids);
      this.applied = target;
      this.needFull = false;
      this.failures = 0;
      result = { kind, ok: true, durationMs: performance.now() - started, ...(drift === undefined ? {} : { drift }) };
      // Status shows locally delivered ports (IPVS) from the first sync on, not 15 s later.
      if (kind === 'full') await this.refreshLocalDelivery(target).catch((err) => this.log.warn({ err: errorMessage(err) }, 'cannot read IPVS services and local addresses'));
      if (!this.acct.enabled) {
        this.acct = await ensureConntrackAccounting(this.o.run);
        this.reportAcct();
      }
    } catch (err) {
      for (const id of ids) this.dirty.add(id);
      this.needFull = true;
      this.failures += 1;
      this.o.metrics.syncFailures.inc({ kind });
      const message = errorMessage(err);
      result = { kind, ok: false, durationMs: performance.now() - started, error: message };
      this.log.error({ kind, err: message, stderr: err instanceof NftError ? err.stderr.slice(0, 2000) : undefined, failures: this.failures }, 'sync failed; previous ruleset kept; retrying as a full sync');
    }
    this.o.metrics.syncDuration.observe({ kind }, result.durationMs / 1000);
    this.lastSyncAt = Date.now();
    this.lastSync = result;
    this.lastSyncTime = new Date().toISOString();
    this.o.metrics.programmedElements.set(this.applied?.chainOf.size ?? 0);
    this.o.metrics.devices.set(this.appliedDevices.length);
    if (result.ok) this.log.info({ kind, durationMs: Math.round(result.durationMs * 10) / 10, services: target.services.size, drift: result.drift }, 'synced');
    this.saveStatusSoon();
    return result;
  }

  private async applyFull(target: DesiredState): Promise<boolean> {
    let devices = this.supported ? await this.currentDevices() : [];
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
      if (!this.supported) throw err;
      // A device named in the transaction may have vanished since listing: prune, retry once.
      const again = await this.currentDevices();
      if (again.join(',') === devices.join(',')) throw err;
      this.o.metrics.devicesMissing.inc(devices.filter((d) => !again.includes(d)).length);
      this.log.warn({ before: devices, now: again }, 'devices changed during the sync; retrying once with the current list');
      devices = again;
      await this.o.nft.apply(fullTransaction(target, this.renderOptions(devices), await this.o.nft.read()));
    }
    this.appliedDevices = devices;
    this.appliedOptions = this.renderOptions(devices);
    return differences.length > 0;
  }

  private async applyPartial(target: DesiredState, ids: Set<string>): Promise<undefined> {
    const delta = diff(this.applied ?? emptyState(), target, ids);
    if (!isEmptyDelta(delta)) await this.o.nft.apply(deltaTransaction(delta, this.renderOptions(this.appliedDevices)));
    this.appliedOptions = this.renderOptions(this.appliedDevices);
    return undefined;
  }

  /** Devices and node addresses: update the flowtable in place; re-address NodePorts. */
  private async pollHost(): Promise<void> {
    if (this.stopped || !this.applied) return;
    if (!this.o.nodeAddresses) {
      const addrs = await listNodeAddresses(this.o.run);
      const now = addrs.map(addressKey).sort().join(',');
      if (now !== this.desired.nodeAddresses.map(addressKey).join(',')) {
        this.log.info({ nodeAddresses: addrs.map((a) => a.addr) }, 'node addresses changed');
        this.desired = withNodeAddresses(this.desired, addrs);
        this.schedule();
      }
    }
    if (!this.supported) return;
    const devices = await this.currentDevices();
    if (devices.join(',') === this.appliedDevices.join(',')) return;
    const started = performance.now();
    await (this.inflight = this.inflight.then(async () => {
      try {
        // The kernel drops a deleted device from the flowtable by itself: start from what
        // the flowtable holds now, not from what we last wrote.
        const inKernel = (await this.o.nft.read())?.flowtables.get(FLOWTABLE)?.devices ?? this.appliedDevices;
        await this.o.nft.apply(deviceOps(inKernel, devices));
        this.log.info({ added: devices.filter((d) => !this.appliedDevices.includes(d)), removed: this.appliedDevices.filter((d) => !devices.includes(d)) }, 'flowtable devices updated in place');
        this.appliedDevices = devices;
        this.lastSync = { kind: 'devices', ok: true, durationMs: performance.now() - started };
      } catch (err) {
        // Most likely a device vanished again; the next full sync re-lists.
        this.o.metrics.devicesMissing.inc();
        this.needFull = true;
        this.lastSync = { kind: 'devices', ok: false, durationMs: performance.now() - started, error: errorMessage(err) };
        this.log.warn({ err: errorMessage(err) }, 'flowtable device update failed; scheduling a full sync');
        this.schedule();
      }
      this.lastSyncTime = new Date().toISOString();
      this.o.metrics.devices.set(this.appliedDevices.length);
      this.saveStatusSoon();
    }));
  }

  async refreshOffloadMetrics(): Promise<Map<string, number> | undefined> {
    if (!this.applied) return undefined;
    const table = await this.o.nft.read().catch(() => undefined);
    if (table) {
      this.o.metrics.offloadDecisions.reset();
      for (const e of this.applied.services.values()) {
        let n = 0;
        for (const v of e.vips) n += table.seenCounters.get(SEEN[v.family])?.get(v.addr) ?? 0;
        this.o.metrics.offloadDecisions.set({ service: e.key }, n);
      }
    }
    await this.refreshLocalDelivery(this.applied);
    await this.refreshOtherFlowtables();
    const dests = await readConntrack(this.o.run);
    if (!dests) return undefined;
    const counts = countByService(this.applied, dests);
    this.o.metrics.offloadedConnections.reset();
    for (const [service, n] of counts) this.o.metrics.offloadedConnections.set({ service }, n);
    this.o.metrics.conntrackEntries.reset();
    for (const [service, n] of entriesByService(this.applied, dests)) this.o.metrics.conntrackEntries.set({ service }, n);
    return counts;
  }

  /** Which programmed ports this node delivers locally (IPVS mode): status, metric, one log line per change. */
  private async refreshLocalDelivery(state: DesiredState): Promise<void> {
    const now = localDelivery(state, await readLocalDelivery(this.o.run));
    this.o.metrics.notOffloadablePorts.reset();
    for (const [service, list] of now) {
      for (const reason of new Set(list.map((b) => b.reason))) {
        this.o.metrics.notOffloadablePorts.set({ service, reason }, list.filter((b) => b.reason === reason).length);
      }
      if (JSON.stringify(list) !== JSON.stringify(this.bypassed.get(service))) {
        this.log.warn({ service, ports: list.map(bypassText), reasons: [...new Set(list.map((b) => b.reason))], detail: [...new Set(list.map((b) => BYPASS_DETAIL[b.reason]))] }, 'ports delivered locally on this node; never offloaded');
      }
    }
    const changed = now.size !== this.bypassed.size || [...now].some(([k, v]) => JSON.stringify(v) !== JSON.stringify(this.bypassed.get(k)));
    this.bypassed = now;
    if (changed) this.saveStatusSoon();
  }

  /** Other flowtables on our devices: status, metric, one log line per change. */
  private async refreshOtherFlowtables(): Promise<void> {
    const all = await readFlowtables(this.o.run);
    if (!all) return;
    const now = otherFlowtables(all, `${FAMILY} ${TABLE}`, this.appliedDevices);
    this.o.metrics.otherFlowtables.set(now.length);
    if (JSON.stringify(now) === JSON.stringify(this.others)) return;
    if (now.length > 0) this.log.warn({ flowtables: now.map(flowtableText), detail: OTHER_FLOWTABLE_DETAIL }, 'other flowtables on flowhint devices');
    else this.log.info('no other flowtables on flowhint devices any more');
    this.others = now;
    this.saveStatusSoon();
  }

  statusDoc(): StatusDoc {
    const state = this.applied ?? emptyState();
    return {
      version: 1,
      pid: process.pid,
      updatedAt: new Date().toISOString(),
      node: {
        mode: this.supported ? 'supported' : 'degraded',
        detail: this.probeDetail,
        conntrackTimeout: { supported: this.ctTimeout, detail: this.ctTimeoutDetail },
        conntrackAccounting: this.acct,
        nodeAddresses: this.desired.nodeAddresses.map((a) => a.addr),
      },
      table: `${FAMILY} ${TABLE}`,
      devices: this.appliedDevices,
      otherFlowtables: this.others.map((f) => ({ ...f, devices: [...f.devices] })),
      services: servicesStatus(state, this.bypassed),
      invalid: [...this.invalid].sort(([a], [b]) => a.localeCompare(b)).map(([service, v]) => ({ service, ...v })),
      lastSync: this.lastSync && this.lastSyncTime
        ? { at: this.lastSyncTime, kind: this.lastSync.kind, ok: this.lastSync.ok, durationMs: Math.round(this.lastSync.durationMs * 10) / 10, ...(this.lastSync.error ? { error: this.lastSync.error } : {}) }
        : null,
    };
  }

  /**
   * The status file lists every programmed Service, so writing it is O(Services): keep it
   * off the sync path, at most one write per STATUS_INTERVAL_MS. stop() flushes it.
   */
  private saveStatusSoon(): void {
    if (!this.o.stateDir || this.statusTimer) return;
    const wait = Math.max(0, this.lastStatusAt + STATUS_INTERVAL_MS - Date.now());
    this.statusTimer = setTimeout(() => {
      this.statusTimer = undefined;
      void this.saveStatus();
    }, wait);
  }

  private async saveStatus(): Promise<void> {
    this.lastStatusAt = Date.now();
    const dir = this.o.stateDir;
    if (!dir) return;
    const doc = this.statusDoc();
    this.statusWrites = this.statusWrites.then(() => writeStatus(dir, doc)).catch((err) => {
      if (!this.warned.has('status')) {
        this.warned.add('status');
        this.log.warn({ err: errorMessage(err), dir }, 'cannot write status file; `flowhint status` will not see this agent');
      }
    });
    await this.statusWrites;
  }
}

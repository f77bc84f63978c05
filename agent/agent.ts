/**
 * The node agent's loop: sources in, one nft transaction at a time out.
 *
 * - Source events become desired state (state/intake.ts); refused Services are reported
 *   once per reason (state/refusals.ts). Bursts are batched by a short rate limit.
 * - Each sync is *full* (nft/programmer.ts: read back, drift, one transaction to the exact
 *   state), *partial* (the Services that changed) or *devices* (the flowtable's devices in
 *   place). What makes it full, in one place (`sync`): `needFull`, set by the first sync, a
 *   failure, the periodic resync and support that appeared; or a change of the table's
 *   shape (the first or last Service of a hint: nft/render.ts's base chains).
 * - A failed transaction leaves the previous ruleset intact; it is retried with backoff
 *   (lib/bounded-runner.ts), as a full sync.
 * - Host polling (host/host-poll.ts) feeds the same sync: node addresses re-address
 *   NodePorts; devices join or leave the flowtable in place. Restart is idempotent: the
 *   flowtable is only touched for its devices, so offloaded connections stay offloaded.
 */
import type { Logger } from 'pino';
import { Backoff } from '../lib/backoff.ts';
import { BoundedRunner } from '../lib/bounded-runner.ts';
import { Conditions } from '../lib/conditions.ts';
import { errorMessage } from '../lib/errors.ts';
import type { Clock } from '../lib/clock.ts';
import type { Runner } from '../lib/exec.ts';
import type { Address } from './state/address.ts';
import { emptyState, withNodeAddresses, withServices, type DesiredState } from './state/desired.ts';
import { intake } from './state/intake.ts';
import { Refusals, type Refusal } from './state/refusals.ts';
import { NftError, type Nft } from './nft/nft.ts';
import { Programmer } from './nft/programmer.ts';
import { DEFAULT_CT_MARK, DEFAULT_SHORT_MARK, sameShape, shapeOf } from './nft/names.ts';
import { FAMILIES, TABLE } from './nft/transaction.ts';
import type { DeviceFilter } from './host/devices.ts';
import { HostPoll } from './host/host-poll.ts';
import { NodeSupport } from './host/node-support.ts';
import { markLive } from './host/live-marks.ts';
import { restoreAccounting } from './host/accounting.ts';
import type { MarkBits } from './host/conntrack.ts';
import type { AgentMetrics } from './report/metrics.ts';
import { Observer } from './report/observe.ts';
import { statusDoc, type StatusDoc, type SyncKind, type SyncResult } from './report/status.ts';
import { reportSync } from './report/sync-report.ts';
import { StatusWriter } from './report/status-writer.ts';
import { nodeStatus } from './report/node-status.ts';
import type { NodeStatusWriter } from './report/node-writer.ts';
import { flowhintVersion } from '../lib/version.ts';
import type { Source, SourceEvent } from './sources/source.ts';

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
  /** The conntrack mark bit for ShortLived connections (`--short-lived-mark-bit`). */
  shortMark?: number;
  stateDir?: string | undefined;
  resyncMs?: number;
  minSyncIntervalMs?: number;
  devicePollMs?: number;
  /** How long a new device must stay up before it joins the flowtable (host/device-settle.ts). */
  deviceSettleMs?: number;
  /** Time for settling devices; the real clock if absent (tests pass a fake one). */
  clock?: Clock;
  reprobeMs?: number;
  conntrackPollMs?: number;
  backoff?: { initialMs: number; maxMs: number };
  /** This node's FlowhintNode writer (with the Kubernetes source); started with the loops. */
  nodeStatus?: NodeStatusWriter | undefined;
}

export class Agent {
  private readonly o: AgentOptions;
  private readonly log: Logger;
  private desired: DesiredState = emptyState();
  private readonly programmer: Programmer;
  /** Devices the host poll found, when they differ from the applied ones. */
  private wantDevices: string[] | undefined;
  private dirty = new Set<string>();
  private needFull = true;
  private readonly refusals = new Refusals();
  /** Node-level conditions already logged (degraded, accounting, devices, status file). */
  private readonly conditions = new Conditions();
  private readonly node: NodeSupport;
  private readonly host: HostPoll;
  private readonly observer: Observer;
  private readonly runner: BoundedRunner;
  private readonly status: StatusWriter;
  private timers: NodeJS.Timeout[] = [];
  private failures = 0;
  /** Offloaded connections on the node at the last conntrack poll; undefined if unknown. */
  private offloaded: number | undefined;
  private stopped = false;
  /** Marking the live connections of newly hinted Services (host/live-marks.ts), one batch after another. */
  private marking: Promise<void> = Promise.resolve();
  private readonly syncedOnce: Promise<void>;
  private resolveSynced!: () => void;
  private rejectSynced!: (err: Error) => void;
  lastSync: SyncResult | undefined;
  private readonly marks: MarkBits;

  constructor(o: AgentOptions) {
    this.o = o;
    this.log = o.logger;
    this.syncedOnce = new Promise((resolve, reject) => {
      this.resolveSynced = resolve;
      this.rejectSynced = reject;
    });
    // What the parts share: the agent's options, its logger and its conditions.
    const shared = { ...o, log: o.logger, conditions: this.conditions };
    const programmed = () => this.programmer.applied !== undefined;
    this.node = new NodeSupport({ ...shared, upgrade: () => this.requestFull(), programmed });
    // Device work yields to Service changes that arrive while it runs (and to stop).
    const yieldTo = () => this.dirty.size > 0 || this.stopped;
    this.programmer = new Programmer({ ...shared, support: this.node, yieldTo });
    this.host = new HostPoll(shared);
    const marks = (this.marks = { long: o.ctMark ?? DEFAULT_CT_MARK, short: o.shortMark ?? DEFAULT_SHORT_MARK });
    this.observer = new Observer({ ...shared, marks, changed: () => this.changed() });
    this.runner = new BoundedRunner({
      minIntervalMs: o.minSyncIntervalMs ?? 100,
      backoff: new Backoff(o.backoff ?? { initialMs: 1_000, maxMs: 60_000 }),
      run: async () => this.stopped || (await this.sync()).ok,
    });
    this.status = new StatusWriter({
      ...shared,
      dir: o.stateDir,
      intervalMs: STATUS_INTERVAL_MS,
      doc: () => this.statusDoc(),
    });
  }

  /** Probe, read node addresses, start the source; resolves when it has synced. */
  async prepare(): Promise<void> {
    await this.node.probeFlowtable();
    await this.node.probeTimeouts();
    await this.node.readTimeouts();
    await this.node.recordAccounting();
    this.desired = withNodeAddresses(this.desired, await this.host.addresses());
    await this.o.source.start({
      events: (events) => this.onEvents(events),
      synced: () => this.resolveSynced(),
      failed: (err) => this.rejectSynced(err),
      refused: (key, refusal) => {
        this.onRefused(key, refusal);
        this.changed();
      },
    });
    await this.syncedOnce;
  }

  /** Run: the sync loop, periodic resync, host polling, re-probe, conntrack metrics. */
  startLoops(): void {
    const every = (ms: number, fn: () => Promise<unknown>) => {
      const fail = (err: unknown) => this.log.error({ err: errorMessage(err) }, 'periodic task failed');
      this.timers.push(setInterval(() => void fn().catch(fail), ms));
    };
    every(this.o.resyncMs ?? 3_600_000, async () => this.requestFull());
    every(this.o.devicePollMs ?? 2_000, () => this.pollHost());
    every(this.o.reprobeMs ?? 60_000, async () => {
      await this.reprobe();
      this.renewFreshness();
    });
    every(this.o.conntrackPollMs ?? 15_000, () => this.refreshOffloadMetrics());
    this.runner.start();
    this.runner.request();
    const version = flowhintVersion();
    this.o.nodeStatus?.start(() => nodeStatus({ doc: this.statusDoc(), version, offloaded: this.offloaded }));
  }

  /** Something the status shows changed: the status file soon; the FlowhintNode if a reader would see it. */
  private changed(): void {
    this.status.soon();
    this.o.nodeStatus?.request();
  }

  /** Re-probe what the node supports, its conntrack timeouts and kube-proxy's mode (the one-minute loop; tests). */
  async reprobe(): Promise<void> {
    await Promise.all([this.node.reprobe(), this.observer.kubeProxyMode()]);
  }

  /**
   * Freshness means health (the one-minute loop; tests): while the last sync succeeded and
   * nothing waits to be programmed (no Service change, no device change, no full sync due,
   * no sync running or retrying), a sync now would find nothing to change, so the last
   * successful sync is renewed to now. A quiet healthy node's freshness stays under a minute
   * or two; failing syncs or a stuck loop let it climb (the alert, docs/operations.md).
   */
  renewFreshness(): void {
    const idle = this.runner.idle && this.dirty.size === 0 && !this.needFull && !this.devicesChanged();
    if (this.lastSync?.ok === true && idle) this.o.metrics.lastSyncSuccess.set(Date.now() / 1000);
  }

  /** The next sync is full (the periodic resync, support that appeared, tests). */
  requestFull(): void {
    this.needFull = true;
    this.runner.request();
  }

  async stop(options: { cleanup?: boolean } = {}): Promise<void> {
    this.stopped = true;
    for (const t of this.timers) clearInterval(t);
    await this.o.nodeStatus?.stop();
    await this.o.source.stop();
    await this.runner.stop();
    await this.marking;
    await this.status.flush();
    if (!options.cleanup) {
      this.log.info('stopped; rules left in place so offloaded connections continue');
      return;
    }
    await this.programmer
      .remove()
      .catch((err: unknown) => this.log.warn({ err: errorMessage(err) }, 'cleanup: delete table failed'));
    this.log.info({ tables: FAMILIES.map((f) => `${f} ${TABLE}`) }, 'tables removed (--cleanup-on-exit)');
    this.log.info(
      { detail: await restoreAccounting(this.o.run, this.o.stateDir) },
      'conntrack accounting after cleanup',
    );
  }

  /** A refusal (by the reader or the source), or `undefined`: the refusal no longer holds. */
  private onRefused(key: string, refusal: Refusal | undefined): void {
    if (!refusal) {
      this.refusals.clear(key);
      return;
    }
    if (!this.refusals.refuse(key, refusal)) return;
    this.o.metrics.invalidHints.inc({ code: refusal.code });
    const { code, reason, where } = refusal;
    this.log.warn({ service: key, code, reason, where }, 'hint not usable; Service not programmed');
  }

  private onEvents(events: readonly SourceEvent[]): void {
    const batch = intake(events, { threshold: this.o.defaultThreshold, timeout: this.o.defaultTimeout });
    for (const key of batch.cleared) this.onRefused(key, undefined);
    for (const [key, refusal] of batch.refused) this.onRefused(key, refusal);
    if (batch.updates.size === 0) return;
    this.desired = withServices(this.desired, batch.updates);
    for (const key of batch.updates.keys()) this.dirty.add(key);
    this.o.metrics.hintedServices.set(this.desired.services.size);
    this.runner.request();
  }

  private devicesChanged(): boolean {
    return this.wantDevices !== undefined && this.wantDevices.join(',') !== this.programmer.devices.join(',');
  }

  /** One sync, now: full, partial, or flowtable devices only. Exposed for --once and tests. */
  async sync(): Promise<SyncResult> {
    const started = performance.now();
    const applied = this.programmer.applied;
    const full = this.needFull || !applied || !sameShape(shapeOf(applied.state), shapeOf(this.desired));
    const kind: SyncKind = full ? 'full' : this.dirty.size === 0 && this.devicesChanged() ? 'devices' : 'partial';
    const target = this.desired;
    const keys = this.dirty;
    this.dirty = new Set();
    // Service changes first: with changed Services, a device change waits for a sync of its
    // own, requested right after this one, so a hint never waits for device transactions.
    const deviceWork = this.node.flowtable && this.devicesChanged();
    const deferred = deviceWork && keys.size > 0 && kind === 'partial';
    const devices = deviceWork && !deferred ? this.wantDevices : undefined;
    const apply = () =>
      kind === 'full'
        ? this.programmer.full(target, () => this.host.devices())
        : this.programmer.partial(target, keys, devices, () => this.host.devices());
    const done = (r: { ok: boolean; drift?: boolean; error?: string }): SyncResult => ({
      kind,
      durationMs: performance.now() - started,
      at: new Date().toISOString(),
      ...r,
    });
    let result: SyncResult;
    let stderr: string | undefined;
    try {
      const drift = await apply();
      result = done({ ok: true, ...(drift === undefined ? {} : { drift }) });
      // Device work left for later (deferred, or stopped for a Service change): the next sync.
      if (deferred || this.programmer.devicesPending) this.runner.request();
      else this.wantDevices = undefined;
      this.needFull = false;
      this.failures = 0;
    } catch (err) {
      for (const key of keys) this.dirty.add(key);
      this.needFull = true;
      this.failures += 1;
      result = done({ ok: false, error: errorMessage(err) });
      stderr = err instanceof NftError ? err.stderr : undefined;
    }
    this.lastSync = result;
    const changed = kind === 'partial' ? [...keys].sort() : undefined;
    const context = {
      services: target.services.size,
      applied: this.programmer.applied,
      failures: this.failures,
      changed,
    };
    reportSync(this.o.metrics, this.log, result, { ...context, stderr });
    if (result.ok) await this.afterSync(kind, target);
    this.changed();
    return result;
  }

  /** After a good sync: local delivery (status shows IPVS ports from the first sync on), accounting. */
  private async afterSync(kind: SyncKind, target: DesiredState): Promise<void> {
    if (kind === 'full') {
      const fail = (err: unknown) =>
        this.log.warn({ err: errorMessage(err) }, 'cannot read IPVS services and local addresses');
      // The mode first: whether kube-proxy DNATs before routing decides node-held addresses.
      await this.observer
        .kubeProxyMode()
        .catch((err: unknown) => this.log.warn({ err: errorMessage(err) }, 'cannot read the kube-proxy mode'));
      await this.observer.localDelivery(target).catch(fail);
    }
    if (!this.node.acct.enabled) await this.node.checkAccounting(shapeOf(target).long);
    const added = this.programmer.addedLong;
    if (added.length > 0)
      this.marking = this.marking
        .then(() => markLive(this.o.run, added, this.marks.long, this.log, () => this.stopped))
        .then(
          () => undefined,
          (err: unknown) => this.log.warn({ err: errorMessage(err) }, 'marking live connections failed'),
        );
  }

  /** Resolves when the live connections of every hint programmed so far are marked (--once, tests). */
  async marked(): Promise<void> {
    await this.marking;
  }

  /** Devices and node addresses: a change becomes a sync (devices in place; NodePorts re-addressed). */
  private async pollHost(): Promise<void> {
    if (this.stopped || !this.programmer.applied) return;
    const devices = this.node.flowtable ? this.programmer.devices : undefined;
    const seen = await this.host.changes({ addresses: this.desired.nodeAddresses, devices });
    if (seen.addresses) this.desired = withNodeAddresses(this.desired, seen.addresses);
    if (seen.devices) this.wantDevices = seen.devices;
    if (seen.addresses || seen.devices) this.runner.request();
  }

  async refreshOffloadMetrics(): Promise<Map<string, number> | undefined> {
    const applied = this.programmer.applied;
    if (!applied) return undefined;
    const counts = await this.observer.refresh(applied.state, this.programmer.devices);
    const offloaded = counts && [...counts.values()].reduce((a, b) => a + b, 0);
    // The FlowhintNode is recomputed (O(Services)) only when the count moved.
    if (offloaded !== this.offloaded) this.o.nodeStatus?.request();
    this.offloaded = offloaded;
    return counts;
  }

  statusDoc(): StatusDoc {
    return statusDoc({
      pid: process.pid,
      now: new Date(),
      support: this.node,
      nodeAddresses: this.desired.nodeAddresses,
      kubeProxyMode: this.observer.kubeProxy,
      marks: this.marks,
      applied: this.programmer.applied && { state: this.programmer.applied.state, devices: this.programmer.devices },
      otherFlowtables: this.observer.others,
      bypassed: this.observer.bypassed,
      refused: this.refusals.list(),
      lastSync: this.lastSync,
    });
  }
}

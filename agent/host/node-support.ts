/**
 * What this node's kernel supports, probed and re-probed: flowtables (else degraded: no
 * offload, everything else programmed), `ct timeout` objects (else ShortLived keeps the
 * kernel's timeouts) and conntrack accounting (else thresholds never pass); and the node's
 * conntrack timeouts, which ShortLived policies start from (a change reprograms them). Each is a gauge,
 * a line in the status document, and one log line when it changes; support that appears
 * while the agent runs asks for a full sync (`upgrade`), which upgrades the ruleset in place.
 */
import type { Logger } from 'pino';
import type { Conditions } from '../../lib/conditions.ts';
import type { Runner } from '../../lib/exec.ts';
import type { Nft } from '../nft/nft.ts';
import { probeCtTimeout, probeFlowtable, type ProbeResult } from './probe.ts';
import { probeDeviceUpdate } from './device-probe.ts';
import { checkAccounting, readAcct, recordAcct, type AcctResult } from './accounting.ts';
import { readNodeTimeouts } from './node-timeouts.ts';
import { nodeTimeoutsKey, sameTimeouts, type NodeTimeouts } from '../state/timeout-policy.ts';

/** The gauges this class sets (the agent's metrics, report/metrics.ts, have them). */
export interface SupportGauges {
  flowtableSupported: { set(value: number): void };
  flowtableDeviceUpdateSupported: { set(value: number): void };
  conntrackTimeoutSupported: { set(value: number): void };
  conntrackAccounting: { set(value: number): void };
}

export interface NodeSupportOptions {
  run: Runner;
  nft: Nft;
  metrics: SupportGauges;
  log: Logger;
  conditions: Conditions;
  /** Support appeared after the ruleset was first programmed: a full sync upgrades it. */
  upgrade: () => void;
  /** Whether a ruleset has been programmed yet. */
  programmed: () => boolean;
  /** Where the accounting value found before the first ruleset is recorded (`--state-dir`). */
  stateDir?: string | undefined;
}

export class NodeSupport {
  private readonly o: NodeSupportOptions;
  flowtable = false;
  flowtableDetail = '';
  /** Whether the kernel adds and removes devices on a live flowtable; undefined until probed (once, with flowtables). */
  deviceUpdate: boolean | undefined;
  deviceUpdateDetail = 'not probed yet';
  ctTimeout = false;
  ctTimeoutDetail = '';
  /** The node's conntrack timeouts, which ShortLived policies start from; undefined before the first read. */
  nodeTimeouts: NodeTimeouts | undefined;
  /** Why some of them could not be read (empty: all were). */
  nodeTimeoutsProblem = '';
  acct: AcctResult = { enabled: false, detail: 'not checked yet' };
  /** nf_conntrack_acct as found before flowhint's first ruleset on this node boot. */
  private acctFound: number | undefined;

  constructor(o: NodeSupportOptions) {
    this.o = o;
  }

  /** Flowtables: `nft -c` of a throwaway table with a flowtable and a `flow add` rule. */
  async probeFlowtable(): Promise<void> {
    const p = await probeFlowtable(this.o.nft);
    const was = this.flowtable;
    this.flowtable = p.supported;
    this.flowtableDetail = p.supported
      ? 'kernel supports flowtables'
      : `kernel has no flowtable support (adding a flowtable failed: ${p.reason}; needs nf_flow_table_inet, nft_flow_offload and nft_fib_inet)`;
    this.o.metrics.flowtableSupported.set(p.supported ? 1 : 0);
    this.report('flowtable', p, was, {
      appeared: 'flowtable support appeared; upgrading the ruleset in place',
      missing: 'degraded: kernel has no flowtable support; programming counters only, nothing is offloaded',
    });
    if (p.supported && this.deviceUpdate === undefined) await this.probeDevices();
  }

  /**
   * Once, with flowtable support: can the kernel add and remove devices on a live flowtable
   * (host/device-probe.ts)? Without, each device change recreates the flowtable.
   */
  private async probeDevices(): Promise<void> {
    const p = await probeDeviceUpdate(this.o.nft);
    this.deviceUpdate = p.supported;
    this.deviceUpdateDetail = p.supported
      ? 'kernel adds and removes devices on a live flowtable'
      : `kernel cannot change a live flowtable's devices (${p.reason}; needs Linux 5.8): each device change recreates the flowtable, and offloaded flows return to the slow path`;
    this.o.metrics.flowtableDeviceUpdateSupported.set(p.supported ? 1 : 0);
    if (p.supported) this.o.log.info('kernel adds and removes devices on a live flowtable');
    else this.o.log.warn({ reason: p.reason }, 'degraded: each flowtable device change recreates the flowtable');
  }

  /** ShortLived needs `ct timeout` objects; without them those Services keep the kernel's timeouts. */
  async probeTimeouts(): Promise<void> {
    const p = await probeCtTimeout(this.o.nft);
    const was = this.ctTimeout;
    this.ctTimeout = p.supported;
    this.ctTimeoutDetail = p.supported
      ? 'kernel supports ct timeout objects'
      : `kernel has no ct timeout support (${p.reason}; needs nft_ct with CONFIG_NF_CONNTRACK_TIMEOUT): ShortLived Services keep the default timeouts`;
    this.o.metrics.conntrackTimeoutSupported.set(p.supported ? 1 : 0);
    this.report('ct-timeout', p, was, {
      appeared: 'ct timeout support appeared; programming ShortLived timeouts',
      missing: 'degraded: kernel has no ct timeout support; ShortLived Services keep the default conntrack timeouts',
    });
  }

  /**
   * Read the node's conntrack timeouts. A change after the first ruleset asks for a full
   * sync: ShortLived policies carry them, and a policy object cannot change in place.
   */
  async readTimeouts(): Promise<void> {
    const r = await readNodeTimeouts(this.o.run);
    const was = this.nodeTimeouts;
    this.nodeTimeouts = r.timeouts;
    this.nodeTimeoutsProblem = r.problem;
    const key = nodeTimeoutsKey(r.timeouts);
    if (!this.o.conditions.changed('node-timeouts', `${key}|${r.problem}`)) return;
    if (r.problem) this.o.log.warn({ problem: r.problem }, 'node conntrack timeouts partly unreadable');
    if (was && !sameTimeouts(was, r.timeouts) && this.o.programmed()) {
      this.o.log.info({ timeouts: r.timeouts }, 'node conntrack timeouts changed; reprogramming ShortLived policies');
      this.o.upgrade();
    }
  }

  /** One log line per change; support that appears after the first sync upgrades the ruleset. */
  private report(name: string, p: ProbeResult, was: boolean, say: { appeared: string; missing: string }): void {
    if (!this.o.conditions.changed(name, String(p.supported))) return;
    if (p.supported && !was && this.o.programmed()) {
      this.o.log.info(say.appeared);
      this.o.upgrade();
    } else if (!p.supported) {
      this.o.log.warn({ reason: p.reason }, say.missing);
    }
  }

  /** Re-probe what is missing (the reprobe loop). */
  async reprobe(): Promise<void> {
    if (!this.flowtable) await this.probeFlowtable();
    if (!this.ctTimeout) await this.probeTimeouts();
    await this.readTimeouts();
  }

  /** Before the first ruleset: record the accounting value found (once per node boot). */
  async recordAccounting(): Promise<void> {
    const now = await readAcct(this.o.run);
    if ('value' in now) this.acctFound = await recordAcct(this.o.stateDir, now.value);
    await this.checkAccounting(false);
  }

  /**
   * Accounting now; `needed`: LongLived ports are programmed, whose `ct packets` rules turn
   * it on in the kernel (set by hand only if they did not). One log line per change.
   */
  async checkAccounting(needed: boolean): Promise<void> {
    this.acct = await checkAccounting(this.o.run, this.acctFound, needed);
    this.o.metrics.conntrackAccounting.set(this.acct.enabled ? 1 : 0);
    const state = `${this.acct.enabled}:${needed && !this.acct.enabled}`;
    if (!this.o.conditions.changed('acct', state)) return;
    if (this.acct.enabled) this.o.log.info({ detail: this.acct.detail }, 'conntrack accounting on');
    else if (needed)
      this.o.log.error(
        { detail: this.acct.detail },
        'conntrack accounting is off: offload-after-packets thresholds cannot pass',
      );
  }
}

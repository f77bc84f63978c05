/**
 * What this node's kernel supports, probed and re-probed: flowtables (else degraded: no
 * offload, everything else programmed), `ct timeout` objects (else ShortLived keeps the
 * kernel's timeouts) and conntrack accounting (else thresholds never pass). Each is a gauge,
 * a line in the status document, and one log line when it changes; support that appears
 * while the agent runs asks for a full sync (`upgrade`), which upgrades the ruleset in place.
 */
import type { Logger } from 'pino';
import type { Conditions } from '../lib/conditions.ts';
import type { Runner } from '../lib/exec.ts';
import type { AgentMetrics } from './metrics.ts';
import type { Nft } from './nft.ts';
import { ensureConntrackAccounting, probeCtTimeout, probeFlowtable, type AcctResult } from './probe.ts';

export interface NodeSupportOptions {
  run: Runner;
  nft: Nft;
  metrics: AgentMetrics;
  log: Logger;
  conditions: Conditions;
  /** Support appeared after the ruleset was first programmed: a full sync upgrades it. */
  upgrade: () => void;
  /** Whether a ruleset has been programmed yet. */
  programmed: () => boolean;
}

export class NodeSupport {
  private readonly o: NodeSupportOptions;
  flowtable = false;
  flowtableDetail = '';
  ctTimeout = false;
  ctTimeoutDetail = '';
  acct: AcctResult = { enabled: false, detail: 'not checked yet' };

  constructor(o: NodeSupportOptions) {
    this.o = o;
  }

  /** Flowtables: `nft -c` of a throwaway table with a flowtable and a `flow add` rule. */
  async probeFlowtable(): Promise<void> {
    const was = this.flowtable;
    const p = await probeFlowtable(this.o.nft);
    this.flowtable = p.supported;
    this.flowtableDetail = p.supported ? 'kernel supports flowtables' : `kernel has no flowtable support (adding a flowtable failed: ${p.reason}; needs nf_flow_table_inet and nft_flow_offload)`;
    this.o.metrics.flowtableSupported.set(p.supported ? 1 : 0);
    if (!this.o.conditions.changed('flowtable', String(p.supported))) return;
    if (p.supported && !was && this.o.programmed()) {
      this.o.log.info('flowtable support appeared; upgrading the ruleset in place');
      this.o.upgrade();
    } else if (!p.supported) {
      this.o.log.warn({ reason: p.reason }, 'degraded: kernel has no flowtable support; programming counters only, nothing is offloaded');
    }
  }

  /** ShortLived needs `ct timeout` objects; without them those Services keep the kernel's timeouts. */
  async probeTimeouts(): Promise<void> {
    const was = this.ctTimeout;
    const p = await probeCtTimeout(this.o.nft);
    this.ctTimeout = p.supported;
    this.ctTimeoutDetail = p.supported ? 'kernel supports ct timeout objects' : `kernel has no ct timeout support (${p.reason}; needs nft_ct with CONFIG_NF_CONNTRACK_TIMEOUT): ShortLived Services keep the default timeouts`;
    this.o.metrics.conntrackTimeoutSupported.set(p.supported ? 1 : 0);
    if (!this.o.conditions.changed('ct-timeout', String(p.supported))) return;
    if (p.supported && !was && this.o.programmed()) {
      this.o.log.info('ct timeout support appeared; programming ShortLived timeouts');
      this.o.upgrade();
    } else if (!p.supported) {
      this.o.log.warn({ reason: p.reason }, 'degraded: kernel has no ct timeout support; ShortLived Services keep the default conntrack timeouts');
    }
  }

  /** Re-probe what is missing (the reprobe loop). */
  async reprobe(): Promise<void> {
    if (!this.flowtable) await this.probeFlowtable();
    if (!this.ctTimeout) await this.probeTimeouts();
  }

  /** Set `nf_conntrack_acct=1` if it is not; says so once per change. */
  async ensureAccounting(): Promise<void> {
    this.acct = await ensureConntrackAccounting(this.o.run);
    this.o.metrics.conntrackAccounting.set(this.acct.enabled ? 1 : 0);
    if (!this.o.conditions.changed('acct', `${this.acct.enabled}:${this.acct.detail}`)) return;
    if (this.acct.enabled) this.o.log.info({ detail: this.acct.detail }, 'conntrack accounting on');
    else this.o.log.error({ detail: this.acct.detail }, 'conntrack accounting is off: offload-after-packets thresholds cannot pass');
  }
}

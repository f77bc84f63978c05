/**
 * What the agent watches besides its own table, for metrics, status and one log line per
 * change: offload decisions per Service (the counting sets), offloaded connections and
 * conntrack entries per Service (kernel-filtered `conntrack -L`, host/conntrack.ts), ports this node delivers locally (IPVS,
 * local addresses) and other owners' flowtables on our devices. Reads only; never programs.
 */
import type { Logger } from 'pino';
import type { Runner } from '../../lib/exec.ts';
import { readConntrackCounts, type MarkBits } from '../host/conntrack.ts';
import type { DesiredState } from '../state/desired.ts';
import { BYPASS_DETAIL, bypassText, localDelivery, readLocalDelivery, type Bypass } from '../host/local-delivery.ts';
import type { AgentMetrics } from './metrics.ts';
import type { Nft } from '../nft/nft.ts';
import {
  OTHER_FLOWTABLE_DETAIL,
  flowtableText,
  otherFlowtables,
  readFlowtables,
  type Flowtable,
} from '../host/other-flowtables.ts';
import { SEEN } from '../nft/names.ts';
import { readKubeProxyMode } from '../host/kube-proxy-mode.ts';
import type { KubeProxyMode } from '../../api/index.ts';
import { FAMILY, TABLE } from '../nft/transaction.ts';

export interface ObserverOptions {
  run: Runner;
  nft: Nft;
  metrics: AgentMetrics;
  log: Logger;
  /** Something the status shows changed. */
  changed: () => void;
  /** The mark bits the ruleset sets, which the conntrack dumps filter on. */
  marks: MarkBits;
}

export class Observer {
  private readonly o: ObserverOptions;
  /** Per Service key: ports delivered locally (IPVS, a local address), never offloaded. */
  bypassed = new Map<string, Bypass[]>();
  /** Other owners' flowtables on our devices (kindnet, Calico, hand-written). */
  others: Flowtable[] = [];
  /** The node's kube-proxy mode; undefined until first read. */
  kubeProxy: KubeProxyMode | undefined;

  constructor(o: ObserverOptions) {
    this.o = o;
  }

  /** Everything, for the programmed state: returns offloaded connections per Service. */
  async refresh(applied: DesiredState, devices: readonly string[]): Promise<Map<string, number> | undefined> {
    const m = this.o.metrics;
    const table = await this.o.nft.readInet().catch(() => undefined);
    if (table) {
      m.offloadDecisions.reset();
      for (const e of applied.services.values()) {
        let n = 0;
        for (const v of e.vips) n += table.sets.get(SEEN[v.family])?.elements.get(v.addr) ?? 0;
        // The counting sets' own counts: a counter that restarts when the table is rebuilt.
        m.offloadDecisions.inc({ service: e.key }, n);
      }
    }
    await this.localDelivery(applied);
    await this.otherFlowtables(devices);
    const counts = await readConntrackCounts(this.o.run, applied, this.o.marks);
    if (!counts) return undefined;
    m.offloadedConnections.reset();
    for (const [service, n] of counts.offloaded) m.offloadedConnections.set({ service }, n);
    m.conntrackEntries.reset();
    for (const [service, n] of counts.entries) m.conntrackEntries.set({ service }, n);
    return counts.offloaded;
  }

  /** Which programmed ports this node delivers locally (IPVS mode): status, metric, one log line per change. */
  async localDelivery(state: DesiredState): Promise<void> {
    const dnatBeforeRouting = this.kubeProxy === 'iptables' || this.kubeProxy === 'nftables';
    const now = localDelivery(state, { ...(await readLocalDelivery(this.o.run)), dnatBeforeRouting });
    this.o.metrics.notOffloadablePorts.reset();
    for (const [service, list] of now) {
      for (const reason of new Set(list.map((b) => b.reason))) {
        this.o.metrics.notOffloadablePorts.set({ service, reason }, list.filter((b) => b.reason === reason).length);
      }
      if (JSON.stringify(list) !== JSON.stringify(this.bypassed.get(service))) {
        this.o.log.warn(
          {
            service,
            ports: list.map(bypassText),
            reasons: [...new Set(list.map((b) => b.reason))],
            detail: [...new Set(list.map((b) => BYPASS_DETAIL[b.reason]))],
          },
          'ports delivered locally on this node; never offloaded',
        );
      }
    }
    const changed =
      now.size !== this.bypassed.size ||
      [...now].some(([k, v]) => JSON.stringify(v) !== JSON.stringify(this.bypassed.get(k)));
    this.bypassed = now;
    if (changed) this.o.changed();
  }

  /**
   * The node's kube-proxy mode, for status: read after full syncs and on the agent's re-probe
   * (a minute), not with every conntrack poll; it changes only when kube-proxy is redeployed.
   */
  async kubeProxyMode(): Promise<void> {
    const mode = await readKubeProxyMode(this.o.run);
    if (mode === this.kubeProxy) return;
    this.o.log.info({ kubeProxyMode: mode }, 'kube-proxy mode found');
    this.kubeProxy = mode;
    this.o.changed();
  }

  /** Other flowtables on our devices: status, metric, one log line per change. */
  private async otherFlowtables(devices: readonly string[]): Promise<void> {
    const all = await readFlowtables(this.o.run);
    if (!all) return;
    const now = otherFlowtables(all, `${FAMILY} ${TABLE}`, devices);
    this.o.metrics.otherFlowtables.set(now.length);
    if (JSON.stringify(now) === JSON.stringify(this.others)) return;
    if (now.length > 0)
      this.o.log.warn(
        { flowtables: now.map(flowtableText), detail: OTHER_FLOWTABLE_DETAIL },
        'other flowtables on flowhint devices',
      );
    else this.o.log.info('no other flowtables on flowhint devices any more');
    this.others = now;
    this.o.changed();
  }
}

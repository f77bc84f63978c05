/** The agent's Prometheus metrics, all prefixed `flowhint_agent_`. */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { registerBuildInfo } from '../../lib/version.ts';

export interface AgentMetrics {
  registry: Registry;
  hintedServices: Gauge;
  programmedElements: Gauge;
  devices: Gauge;
  devicesMissing: Counter;
  syncDuration: Histogram<'kind'>;
  syncFailures: Counter<'kind'>;
  informerRestarts: Counter;
  invalidHints: Counter<'code'>;
  flowtableSupported: Gauge;
  flowtableDeviceUpdateSupported: Gauge;
  conntrackAccounting: Gauge;
  driftRepairs: Counter;
  offloadedConnections: Gauge<'service'>;
  offloadDecisions: Counter<'service'>;
  lastSyncSuccess: Gauge;
  notOffloadablePorts: Gauge<'service' | 'reason'>;
  conntrackTimeoutSupported: Gauge;
  conntrackEntries: Gauge<'service'>;
  otherFlowtables: Gauge;
}

export function createAgentMetrics(options: { defaultMetrics?: boolean } = {}): AgentMetrics {
  const registry = new Registry();
  if (options.defaultMetrics ?? true) collectDefaultMetrics({ register: registry });
  const r = [registry];
  registerBuildInfo(registry);
  const m: AgentMetrics = {
    registry,
    hintedServices: new Gauge({
      name: 'flowhint_agent_hinted_services',
      help: 'Hinted Services programmed on this node.',
      registers: r,
    }),
    programmedElements: new Gauge({
      name: 'flowhint_agent_programmed_elements',
      help: 'Service addresses in the verdict maps (vips4 + vips6).',
      registers: r,
    }),
    devices: new Gauge({ name: 'flowhint_agent_devices', help: 'Devices tracked in the flowtable.', registers: r }),
    devicesMissing: new Counter({
      name: 'flowhint_agent_devices_missing_total',
      help: 'Devices that vanished between listing and applying (pruned and retried).',
      registers: r,
    }),
    syncDuration: new Histogram({
      name: 'flowhint_agent_sync_duration_seconds',
      help: 'Time to compute and apply one nft transaction, by kind (full or partial).',
      labelNames: ['kind'],
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
      registers: r,
    }),
    syncFailures: new Counter({
      name: 'flowhint_agent_sync_failures_total',
      help: 'Failed nft transactions, by kind; the previous ruleset stays.',
      labelNames: ['kind'],
      registers: r,
    }),
    informerRestarts: new Counter({
      name: 'flowhint_agent_informer_restarts_total',
      help: 'Service informer restarts after errors other than 410 Gone.',
      registers: r,
    }),
    invalidHints: new Counter({
      name: 'flowhint_agent_invalid_hints_total',
      help: 'Hinted Services refused by the api/ reader (not programmed), by code.',
      labelNames: ['code'],
      registers: r,
    }),
    flowtableSupported: new Gauge({
      name: 'flowhint_agent_flowtable_supported',
      help: '1 if the kernel supports flowtables; 0 means degraded (counters only, no offload).',
      registers: r,
    }),
    flowtableDeviceUpdateSupported: new Gauge({
      name: 'flowhint_agent_flowtable_device_update_supported',
      help: '1 if the kernel adds and removes devices on a live flowtable (Linux 5.8+); 0 means each device change recreates the flowtable (offloaded flows return to the slow path).',
      registers: r,
    }),
    conntrackAccounting: new Gauge({
      name: 'flowhint_agent_conntrack_accounting',
      help: '1 if net.netfilter.nf_conntrack_acct is on (thresholds need it).',
      registers: r,
    }),
    driftRepairs: new Counter({
      name: 'flowhint_agent_drift_repairs_total',
      help: 'Full resyncs that found the table differing from the desired state.',
      registers: r,
    }),
    offloadedConnections: new Gauge({
      name: 'flowhint_agent_offloaded_connections',
      help: 'Connections of each Service offloaded now, read from conntrack.',
      labelNames: ['service'],
      registers: r,
    }),
    offloadDecisions: new Counter({
      name: 'flowhint_agent_offload_decisions_total',
      help: "Packets that passed the offload rule on a Service's own addresses since the table was made (about one per offloaded connection; NodePorts count on the node address, not here).",
      labelNames: ['service'],
      registers: r,
    }),
    lastSyncSuccess: new Gauge({
      name: 'flowhint_agent_last_sync_success_timestamp_seconds',
      help: 'When the last successful sync ended (Unix time); time() minus it is how stale the node is.',
      registers: r,
    }),
    conntrackTimeoutSupported: new Gauge({
      name: 'flowhint_agent_conntrack_timeout_supported',
      help: '1 if the kernel supports ct timeout objects; 0 means ShortLived Services keep the kernel default timeouts (degraded).',
      registers: r,
    }),
    conntrackEntries: new Gauge({
      name: 'flowhint_agent_conntrack_entries',
      help: 'Conntrack entries of each ShortLived Service now (by original destination), read from conntrack.',
      labelNames: ['service'],
      registers: r,
    }),
    notOffloadablePorts: new Gauge({
      name: 'flowhint_agent_not_offloadable_ports',
      help: "A hinted Service's ports that this node delivers locally and so never offloads, by reason (ipvs: kube-proxy IPVS mode; local-address).",
      labelNames: ['service', 'reason'],
      registers: r,
    }),
    otherFlowtables: new Gauge({
      name: 'flowhint_agent_other_flowtables',
      help: "Other owners' flowtables on flowhint's devices (kindnet, Calico, hand-written); if one offloads everything, unhinted Services are offloaded too.",
      registers: r,
    }),
  };
  // Series exist before their first event, so rate() and absent() work from the first scrape.
  for (const kind of ['full', 'partial', 'devices']) {
    m.syncFailures.inc({ kind }, 0);
    m.syncDuration.zero({ kind });
  }
  return m;
}

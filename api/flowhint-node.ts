/**
 * `FlowhintNode` (flowhint.dev/v1alpha1): one cluster-scoped object per node, named after the
 * node and owned by its `Node`, whose `status` the node's agent writes (server-side apply,
 * field manager `flowhint-agent`). What a reader learns from it, and nothing that grows with
 * the cluster: counts, not the list of programmed Services; a bounded list of what is not
 * offloadable. The CRD (manifests/base/crd.yaml) states the same schema in OpenAPI; a test
 * holds the two together. `flowhint explain` reads these objects with this schema.
 */
import { z } from 'zod';
import { DOMAIN } from './keys.ts';

export const NODE_GROUP = DOMAIN;
export const NODE_VERSION = 'v1alpha1';
export const NODE_KIND = 'FlowhintNode';
export const NODE_PLURAL = 'flowhintnodes';
/** The agent's field manager: it owns `status` and the owner reference, nothing else. */
export const NODE_FIELD_MANAGER = 'flowhint-agent';
/** At most this many not-offloadable entries per node; `notOffloadableTotal` counts them all. */
export const NOT_OFFLOADABLE_MAX = 32;

export const KUBE_PROXY_MODES = ['nftables', 'iptables', 'ipvs', 'unknown'] as const;
export type KubeProxyMode = (typeof KUBE_PROXY_MODES)[number];

/** What each kube-proxy mode means for hints (status.kubeProxy.meaning, docs, explain). */
export const KUBE_PROXY_MEANING: Record<KubeProxyMode, string> = {
  nftables: "kube-proxy's nftables rules DNAT Service traffic; hinted Services are offloaded after DNAT",
  iptables: "kube-proxy's iptables rules DNAT Service traffic; hinted Services are offloaded after DNAT",
  ipvs: 'kube-proxy IPVS delivers Service traffic on this node without netfilter NAT; those ports are never offloaded (see notOffloadable)',
  unknown:
    'no kube-proxy rules found (another Service proxy, or none yet); Services whose traffic netfilter DNATs are offloaded',
};

export const NOT_OFFLOADABLE_KINDS = ['RefusedHint', 'IPVSPort', 'LocalAddress', 'OtherFlowtable'] as const;
export type NotOffloadableKind = (typeof NOT_OFFLOADABLE_KINDS)[number];

const Count = z.number().int().min(0);

export const NotOffloadable = z.object({
  kind: z.enum(NOT_OFFLOADABLE_KINDS),
  /** `namespace/name`; absent for a node-wide entry (another flowtable). */
  service: z.string().optional(),
  /** What: `10.96.0.10 tcp/80`, an error code, or `inet kindnet/fastpath on eth0`. */
  target: z.string(),
  reason: z.string(),
});
export type NotOffloadable = z.infer<typeof NotOffloadable>;

const Support = z.enum(['Supported', 'Degraded']);

/**
 * Liveness: the agent writes its status at least once per `HEARTBEAT_SECONDS`, quiet or not,
 * with `heartbeatTime` set to the write's time. A reader counts an agent alive while its
 * heartbeat is younger than `HEARTBEAT_STALE_SECONDS`: three intervals, so one lost write
 * (a retry under backoff, an API server restart) never makes a live agent look dead.
 */
export const HEARTBEAT_SECONDS = 60;
export const HEARTBEAT_STALE_SECONDS = 3 * HEARTBEAT_SECONDS;

export const FlowhintNodeStatus = z.object({
  agentVersion: z.string(),
  /** When this status was last written (RFC 3339): renewed every HEARTBEAT_SECONDS. Absent from earlier agents. */
  heartbeatTime: z.iso.datetime({ offset: true }).optional(),
  support: z.object({
    /** LongLived: flowtable offload on this kernel. */
    offload: Support,
    reason: z.string(),
    /** ShortLived: conntrack timeout policies on this kernel. */
    conntrackTimeouts: Support,
  }),
  kubeProxy: z.object({ mode: z.enum(KUBE_PROXY_MODES), meaning: z.string() }),
  services: z.object({
    /** Hinted Services this agent sees: programmed plus refused. */
    hinted: Count,
    programmed: Count,
    refused: Count,
    /** Connections offloaded on this node now; absent when conntrack cannot be read. */
    offloadedConnections: Count.optional(),
  }),
  notOffloadable: z.array(NotOffloadable).max(NOT_OFFLOADABLE_MAX),
  notOffloadableTotal: Count,
  lastSync: z
    .object({
      /** RFC 3339, as the API server's date-time format wants it. */
      time: z.iso.datetime({ offset: true }),
      kind: z.enum(['full', 'partial', 'devices']),
      result: z.enum(['Succeeded', 'Failed']),
      error: z.string().optional(),
    })
    .optional(),
});
export type FlowhintNodeStatus = z.infer<typeof FlowhintNodeStatus>;

/** A FlowhintNode as read back (loose: the API server adds metadata fields). */
export const FlowhintNode = z.looseObject({
  metadata: z.looseObject({ name: z.string() }),
  status: FlowhintNodeStatus.optional(),
});
export type FlowhintNode = z.infer<typeof FlowhintNode>;

/** The object the agent applies to create it: name and owner reference only. */
export function flowhintNodeObject(node: string, nodeUid: string): object {
  return {
    apiVersion: `${NODE_GROUP}/${NODE_VERSION}`,
    kind: NODE_KIND,
    metadata: {
      name: node,
      ownerReferences: [{ apiVersion: 'v1', kind: 'Node', name: node, uid: nodeUid }],
    },
  };
}

/** The status the agent applies (to the status subresource). */
export function flowhintNodeStatusObject(node: string, status: FlowhintNodeStatus): object {
  return { apiVersion: `${NODE_GROUP}/${NODE_VERSION}`, kind: NODE_KIND, metadata: { name: node }, status };
}

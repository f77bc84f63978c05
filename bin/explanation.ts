/**
 * `flowhint explain`'s answer (pure): one Service and every FlowhintNode in, what happens to
 * the Service's hint out. Accepted or not is the agent's own reader (api/reader.ts: the
 * webhook's validation plus the mirror label); per node, the FlowhintNode's status.
 *
 * A node counts as programmed for the Service when its agent is alive (a heartbeat younger
 * than HEARTBEAT_STALE_SECONDS, judged when `now` is given), reports support for the hint, a
 * successful last sync and no refusal of this Service. Given the Nodes that should run the
 * agent, a Node without a FlowhintNode counts too, as `no-agent`: the total is every node. FlowhintNodes carry counts, not the
 * list of programmed Services (it would grow with the cluster), so a Service changed in the
 * last seconds may be counted before a node has synced it.
 */
import {
  HEARTBEAT_STALE_SECONDS,
  HINTS,
  HINT_ANNOTATION,
  readHint,
  type FlowhintNode,
  type NotOffloadable,
  type TrafficHint,
} from '../api/index.ts';

export type NodeState = 'programmed' | 'degraded' | 'refused' | 'failing' | 'not-reported' | 'not-alive' | 'no-agent';

/** What explain knows of the cluster besides the FlowhintNodes. */
export interface ClusterView {
  /** Nodes that should run the agent (the DaemonSet's selector), or 'forbidden' (not counted). */
  nodes?: readonly string[] | 'forbidden';
  /** Now, in ms since the epoch: the heartbeats are judged against it (not judged without). */
  now?: number;
  /** This flowhint's version: agents of another version are reported. */
  version?: string;
}

export interface NodeFinding {
  node: string;
  state: NodeState;
  detail?: string;
}

export interface Explanation {
  service: string;
  hint: string | null;
  accepted: boolean;
  /** Why not accepted: a catalogue code and words. */
  code?: string;
  reason: string;
  /** Accepted: the Service's own parameters (null: the agent's default). */
  parameters?: { offloadAfterPackets: number | null; conntrackTimeoutSeconds: number | null };
  /** FlowhintNodes: read, the CRD is not installed, or the caller may not list them. */
  nodeStatus: 'available' | 'crd-absent' | 'forbidden';
  nodes: { total: number; programmed: number; findings: NodeFinding[] };
  /** Nodes: 'available' when every Node was counted, 'forbidden' (the caller may not list them), or 'not-read'. */
  nodeList: 'available' | 'forbidden' | 'not-read';
  /** Agents by version, when more than one version runs or it is not this flowhint's. */
  agentVersions?: Record<string, number>;
  notOffloadable: Array<{ node: string; kind: NotOffloadable['kind']; target: string; reason: string }>;
  otherFlowtables: Array<{ node: string; flowtable: string }>;
  advice: string[];
}

const VIEWER =
  'ask for a ClusterRoleBinding to the ClusterRole flowhint-viewer (kubectl create clusterrolebinding NAME --clusterrole=flowhint-viewer --user=YOU)';

const AGENT_POD = (node: string) =>
  `kubectl -n flowhint-system get pods -l app.kubernetes.io/name=flowhint-agent --field-selector spec.nodeName=${node}`;

/** "45s", "12m", "3h", "2d": how long ago, as kubectl prints ages. */
export function age(seconds: number): string {
  const s = Math.max(0, Math.floor(seconds));
  if (s < 120) return `${s}s`;
  if (s < 7200) return `${Math.floor(s / 60)}m`;
  if (s < 172_800) return `${Math.floor(s / 3600)}h`;
  return `${Math.floor(s / 86_400)}d`;
}

/** Not alive: no heartbeat, or one older than HEARTBEAT_STALE_SECONDS at `now`. */
function staleHeartbeat(heartbeat: string | undefined, now: number | undefined): string | undefined {
  if (now === undefined) return undefined;
  if (heartbeat === undefined)
    return 'its agent writes no heartbeat (a version before heartbeats, or not running): whether it is alive is unknown';
  const seconds = (now - Date.parse(heartbeat)) / 1000;
  return seconds > HEARTBEAT_STALE_SECONDS
    ? `last heartbeat ${age(seconds)} ago (renewed every minute): the agent is not running or cannot reach the API server`
    : undefined;
}

function nodeFinding(key: string, hint: TrafficHint, n: FlowhintNode, now: number | undefined): NodeFinding {
  const node = n.metadata.name;
  const s = n.status;
  if (n.unreadable === true)
    return {
      node,
      state: 'not-reported',
      detail: 'its status is not one this flowhint reads (another version wrote it)',
    };
  if (!s) return { node, state: 'not-reported', detail: 'the agent has not written its status yet' };
  const stale = staleHeartbeat(s.heartbeatTime, now);
  if (stale !== undefined) return { node, state: 'not-alive', detail: stale };
  const refused = s.notOffloadable.find((e) => e.kind === 'RefusedHint' && e.service === key);
  if (refused) return { node, state: 'refused', detail: `${refused.target}: ${refused.reason}` };
  if (s.lastSync?.result === 'Failed')
    return { node, state: 'failing', detail: s.lastSync.error ?? 'last sync failed' };
  const spec = HINTS[hint];
  if (spec.offload && s.support.offload === 'Degraded') return { node, state: 'degraded', detail: s.support.reason };
  if (spec.shortTimeout && s.support.conntrackTimeouts === 'Degraded')
    return { node, state: 'degraded', detail: 'no conntrack timeout policies on this kernel' };
  if (!s.lastSync) return { node, state: 'not-reported', detail: 'no sync yet' };
  return { node, state: 'programmed' };
}

/** What to do, from what was found (one line each). */
function advise(e: Explanation, truncated: string[]): string[] {
  const out: string[] = [];
  if (e.nodeStatus === 'crd-absent')
    out.push(
      'the FlowhintNode CRD is not installed, so nodes cannot report: install flowhint from manifests/ (kubectl apply -k), or on a node run `flowhint status`',
    );
  else if (e.nodeStatus === 'forbidden')
    out.push(
      `you may not list FlowhintNodes, which are cluster-scoped (view through a RoleBinding does not reach them): ${VIEWER}, or run \`flowhint status\` in an agent pod`,
    );
  else if (e.nodes.total === 0)
    out.push('no node has reported: is the agent running? kubectl -n flowhint-system get daemonset flowhint-agent');
  if (e.nodeList === 'forbidden' && e.nodeStatus === 'available')
    out.push(`you may not list Nodes, so nodes where no agent runs are not counted: ${VIEWER}`);
  const byState = (state: NodeState) => e.nodes.findings.filter((f) => f.state === state).map((f) => f.node);
  const absent = byState('no-agent');
  if (absent.length > 0)
    out.push(
      `${absent.join(', ')}: no agent has reported from there; is its pod pending or crashing? kubectl -n flowhint-system get pods -l app.kubernetes.io/name=flowhint-agent -o wide`,
    );
  for (const node of byState('not-alive')) out.push(`${node}: its agent is not alive; ${AGENT_POD(node)}`);
  if (e.agentVersions)
    out.push(
      'agents of another version run: finish the rollout (kubectl -n flowhint-system rollout status daemonset/flowhint-agent); docs/operations.md#upgrades says which versions may run together',
    );
  const degraded = byState('degraded');
  if (degraded.length > 0)
    out.push(
      `${degraded.join(', ')}: the kernel lacks what the hint needs (status.support.reason; docs/operations.md#troubleshooting); connections through them take the normal path`,
    );
  for (const node of byState('failing'))
    out.push(`${node}: the agent's last sync failed; read its log: ${AGENT_POD(node)}`);
  if (byState('refused').length > 0)
    out.push('nodes refused the hint (see above): fix the Service as the reason says; the webhook would refuse it too');
  if (e.notOffloadable.some((p) => p.kind === 'IPVSPort'))
    out.push(
      'kube-proxy runs in IPVS mode there: IPVS delivers these ports without netfilter NAT, so no flowtable can offload them; use kube-proxy nftables or iptables mode for offload',
    );
  if (e.otherFlowtables.length > 0)
    out.push(
      'another flowtable shares the devices (kindnet, Calico or hand-written): if it offloads every connection, hints make no difference there',
    );
  for (const node of truncated)
    out.push(`${node} lists only part of what it cannot offload: run \`flowhint status\` in its agent pod`);
  return out;
}

/** Agents by version, when more than one version runs or one is not `version`; else undefined. */
function versions(list: readonly FlowhintNode[], version: string | undefined): Record<string, number> | undefined {
  const out: Record<string, number> = {};
  for (const n of list) if (n.status) out[n.status.agentVersion] = (out[n.status.agentVersion] ?? 0) + 1;
  const seen = Object.keys(out);
  return seen.length > 1 || (version !== undefined && seen.some((v) => v !== version)) ? out : undefined;
}

export function explain(
  service: unknown,
  nodes: readonly FlowhintNode[] | 'crd-absent' | 'forbidden',
  cluster: ClusterView = {},
): Explanation {
  const read = readHint(service);
  const list = typeof nodes === 'string' ? [] : nodes;
  // Nodes that should run an agent and have no FlowhintNode (known only when both were read).
  const reported = new Set(list.map((n) => n.metadata.name));
  const expected =
    typeof nodes === 'string' || cluster.nodes === undefined || cluster.nodes === 'forbidden' ? [] : cluster.nodes;
  const absent: NodeFinding[] = expected
    .filter((n) => !reported.has(n))
    .map((node) => ({ node, state: 'no-agent', detail: 'no FlowhintNode: no agent has reported from this node' }));
  const agentVersions = versions(list, cluster.version);
  const key = read.usable ? read.hint.key : read.key;
  const annotations = (service as { metadata?: { annotations?: Record<string, string> | null } }).metadata?.annotations;
  const base = {
    service: key,
    hint: annotations?.[HINT_ANNOTATION] ?? null,
    nodeStatus: typeof nodes === 'string' ? nodes : ('available' as const),
    nodeList:
      cluster.nodes === undefined
        ? ('not-read' as const)
        : cluster.nodes === 'forbidden'
          ? cluster.nodes
          : ('available' as const),
    ...(agentVersions ? { agentVersions } : {}),
    notOffloadable: [] as Explanation['notOffloadable'],
    otherFlowtables: list.flatMap((n) =>
      (n.status?.notOffloadable ?? [])
        .filter((e) => e.kind === 'OtherFlowtable')
        .map((e) => ({ node: n.metadata.name, flowtable: e.target })),
    ),
    advice: [] as string[],
  };
  if (!read.usable) {
    const e: Explanation = {
      ...base,
      accepted: false,
      code: read.code,
      reason: read.reason,
      nodes: { total: list.length + absent.length, programmed: 0, findings: [] },
    };
    const fix =
      read.code === 'FH_NOT_HINTED'
        ? `to offload its long-lived connections: kubectl annotate service -n ${key.split('/')[0] ?? ''} ${key.split('/')[1] ?? ''} ${HINT_ANNOTATION}=LongLived`
        : read.code === 'FH_NOT_ADMITTED'
          ? 'the webhook never admitted it (created before flowhint was installed, or while the webhook was down): run `flowhint backfill`, or update the Service'
          : 'fix the annotation as the reason says: the webhook refuses this value, so it got in while the webhook was not enforcing (before install, or while it was down)';
    e.advice = [fix, ...advise(e, [])];
    return e;
  }
  const { hint } = read;
  const findings = [...list.map((n) => nodeFinding(key, hint.hint, n, cluster.now)), ...absent];
  const truncated: string[] = [];
  const ports = list.flatMap((n) => {
    const s = n.status;
    if (!s) return [];
    if (s.notOffloadable.length < s.notOffloadableTotal) truncated.push(n.metadata.name);
    return s.notOffloadable
      .filter((p) => p.service === key && (p.kind === 'IPVSPort' || p.kind === 'LocalAddress'))
      .map((p) => ({ node: n.metadata.name, kind: p.kind, target: p.target, reason: p.reason }));
  });
  const e: Explanation = {
    ...base,
    accepted: true,
    reason: `${hint.hint}: ${HINTS[hint.hint].description}`,
    parameters: {
      offloadAfterPackets: hint.offloadAfterPackets ?? null,
      conntrackTimeoutSeconds: hint.conntrackTimeoutSeconds ?? null,
    },
    nodes: { total: findings.length, programmed: findings.filter((f) => f.state === 'programmed').length, findings },
    notOffloadable: ports,
  };
  e.advice = advise(
    e,
    truncated.filter((n) => !ports.some((p) => p.node === n)),
  );
  return e;
}

/** The few lines a person reads. */
export function formatExplanation(e: Explanation): string {
  const lines: string[] = [];
  if (!e.accepted) {
    lines.push(`${e.service}: not accepted (${e.code ?? ''}): ${e.reason}`);
  } else {
    const p = e.parameters;
    const params = [
      p?.offloadAfterPackets === null || p?.offloadAfterPackets === undefined
        ? undefined
        : `offload after ${p.offloadAfterPackets} packets`,
      p?.conntrackTimeoutSeconds === null || p?.conntrackTimeoutSeconds === undefined
        ? undefined
        : `conntrack timeout ${p.conntrackTimeoutSeconds}s`,
    ].filter(Boolean);
    lines.push(`${e.service}: accepted: ${e.reason}${params.length > 0 ? ` (${params.join(', ')})` : ''}`);
    if (e.nodeStatus === 'crd-absent') lines.push('nodes: unknown (no FlowhintNode CRD)');
    else if (e.nodeStatus === 'forbidden') lines.push('nodes: unknown (you may not list FlowhintNodes)');
    else
      lines.push(
        `programmed on ${e.nodes.programmed} of ${e.nodes.total} nodes${e.nodeList === 'forbidden' ? ' (nodes without an agent not counted: you may not list Nodes)' : ''}`,
      );
    for (const f of e.nodes.findings)
      if (f.state !== 'programmed') lines.push(`  ${f.node}: ${f.state}${f.detail ? `: ${f.detail}` : ''}`);
  }
  if (e.agentVersions)
    lines.push(
      `agent versions: ${Object.entries(e.agentVersions)
        .map(([v, n]) => `${v} on ${n} node${n === 1 ? '' : 's'}`)
        .join(', ')}`,
    );
  for (const p of e.notOffloadable) lines.push(`not offloadable on ${p.node}: ${p.target} (${p.kind}): ${p.reason}`);
  for (const f of e.otherFlowtables) lines.push(`other flowtable on ${f.node}: ${f.flowtable}`);
  if (e.advice.length > 0) {
    lines.push('what to do:');
    for (const a of e.advice) lines.push(`  - ${a}`);
  }
  return `${lines.join('\n')}\n`;
}

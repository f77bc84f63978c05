/**
 * `flowhint explain`'s answer (pure): one Service and every FlowhintNode in, what happens to
 * the Service's hint out. Accepted or not is the agent's own reader (api/reader.ts: the
 * webhook's validation plus the mirror label); per node, the FlowhintNode's status.
 *
 * A node counts as programmed for the Service when its agent reports support for the hint,
 * a successful last sync and no refusal of this Service. FlowhintNodes carry counts, not the
 * list of programmed Services (it would grow with the cluster), so a Service changed in the
 * last seconds may be counted before a node has synced it.
 */
import {
  HINTS,
  HINT_ANNOTATION,
  readHint,
  type FlowhintNode,
  type NotOffloadable,
  type TrafficHint,
} from '../api/index.ts';

export type NodeState = 'programmed' | 'degraded' | 'refused' | 'failing' | 'not-reported';

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
  notOffloadable: Array<{ node: string; kind: NotOffloadable['kind']; target: string; reason: string }>;
  otherFlowtables: Array<{ node: string; flowtable: string }>;
  advice: string[];
}

const AGENT_POD = (node: string) =>
  `kubectl -n flowhint-system get pods -l app.kubernetes.io/name=flowhint-agent --field-selector spec.nodeName=${node}`;

function nodeFinding(key: string, hint: TrafficHint, n: FlowhintNode): NodeFinding {
  const node = n.metadata.name;
  const s = n.status;
  if (n.unreadable === true)
    return {
      node,
      state: 'not-reported',
      detail: 'its status is not one this flowhint reads (another version wrote it)',
    };
  if (!s) return { node, state: 'not-reported', detail: 'the agent has not written its status yet' };
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
      'you may not list FlowhintNodes, which are cluster-scoped (view through a RoleBinding does not reach them): ask for a ClusterRoleBinding to the ClusterRole flowhint-view (kubectl create clusterrolebinding NAME --clusterrole=flowhint-view --user=YOU), or run `flowhint status` in an agent pod',
    );
  else if (e.nodes.total === 0)
    out.push('no node has reported: is the agent running? kubectl -n flowhint-system get daemonset flowhint-agent');
  const byState = (state: NodeState) => e.nodes.findings.filter((f) => f.state === state).map((f) => f.node);
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

export function explain(service: unknown, nodes: readonly FlowhintNode[] | 'crd-absent' | 'forbidden'): Explanation {
  const read = readHint(service);
  const list = typeof nodes === 'string' ? [] : nodes;
  const key = read.usable ? read.hint.key : read.key;
  const annotations = (service as { metadata?: { annotations?: Record<string, string> | null } }).metadata?.annotations;
  const base = {
    service: key,
    hint: annotations?.[HINT_ANNOTATION] ?? null,
    nodeStatus: typeof nodes === 'string' ? nodes : ('available' as const),
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
      nodes: { total: list.length, programmed: 0, findings: [] },
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
  const findings = list.map((n) => nodeFinding(key, hint.hint, n));
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
    nodes: { total: list.length, programmed: findings.filter((f) => f.state === 'programmed').length, findings },
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
    else lines.push(`programmed on ${e.nodes.programmed} of ${e.nodes.total} nodes`);
    for (const f of e.nodes.findings)
      if (f.state !== 'programmed') lines.push(`  ${f.node}: ${f.state}${f.detail ? `: ${f.detail}` : ''}`);
  }
  for (const p of e.notOffloadable) lines.push(`not offloadable on ${p.node}: ${p.target} (${p.kind}): ${p.reason}`);
  for (const f of e.otherFlowtables) lines.push(`other flowtable on ${f.node}: ${f.flowtable}`);
  if (e.advice.length > 0) {
    lines.push('what to do:');
    for (const a of e.advice) lines.push(`  - ${a}`);
  }
  return `${lines.join('\n')}\n`;
}

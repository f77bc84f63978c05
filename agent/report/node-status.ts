/**
 * The node's `FlowhintNode` status, made from the agent's status document (pure), and what
 * of it a reader would see change. The document lists every programmed Service; the
 * FlowhintNode carries counts and a bounded list of what is not offloadable, so its size and
 * its write rate never grow with the cluster's Services.
 *
 * Two kinds of fields: `visible` ones (support, kube-proxy mode, counts, the not-offloadable
 * list, the last sync's kind and result, the version) make a write as soon as they change;
 * `volatile` ones (the last sync's time, offloaded connections) change with every sync and
 * every connection, and are only refreshed at most once a minute (node-writer.ts).
 */
import {
  KUBE_PROXY_MEANING,
  NOT_OFFLOADABLE_MAX,
  type FlowhintNodeStatus,
  type NotOffloadable,
} from '../../api/index.ts';
import { BYPASS_DETAIL, bypassText } from '../host/local-delivery.ts';
import { OTHER_FLOWTABLE_DETAIL, flowtableText } from '../host/other-flowtables.ts';
import type { StatusDoc } from './status.ts';

export interface NodeStatusInput {
  readonly doc: StatusDoc;
  readonly version: string;
  /** Offloaded connections on this node now; undefined when not known. */
  readonly offloaded: number | undefined;
}

const byServiceThenTarget = (a: NotOffloadable, b: NotOffloadable) =>
  (a.service ?? '').localeCompare(b.service ?? '') || a.target.localeCompare(b.target);

/** Everything not offloadable on this node, refused hints first (unbounded; `nodeStatus` bounds it). */
export function notOffloadable(doc: StatusDoc): NotOffloadable[] {
  const refused = doc.invalid.map((i): NotOffloadable => ({
    kind: 'RefusedHint',
    service: i.service,
    target: i.code,
    reason: i.reason,
  }));
  const bypassed = doc.services.flatMap((s) =>
    (s.notOffloaded ?? []).map((b): NotOffloadable => ({
      kind: b.reason === 'ipvs' ? 'IPVSPort' : 'LocalAddress',
      service: s.service,
      target: bypassText(b),
      reason: BYPASS_DETAIL[b.reason],
    })),
  );
  const others = doc.otherFlowtables.map((f): NotOffloadable => ({
    kind: 'OtherFlowtable',
    target: flowtableText(f),
    reason: OTHER_FLOWTABLE_DETAIL,
  }));
  return [...refused.sort(byServiceThenTarget), ...bypassed.sort(byServiceThenTarget), ...others];
}

/** The FlowhintNode status (pure). */
export function nodeStatus(input: NodeStatusInput): FlowhintNodeStatus {
  const { doc } = input;
  const all = notOffloadable(doc);
  const mode = doc.node.kubeProxyMode ?? 'unknown';
  const ls = doc.lastSync;
  return {
    agentVersion: input.version,
    support: {
      offload: doc.node.mode === 'supported' ? 'Supported' : 'Degraded',
      reason: doc.node.detail,
      conntrackTimeouts: doc.node.conntrackTimeout?.supported === false ? 'Degraded' : 'Supported',
    },
    kubeProxy: { mode, meaning: KUBE_PROXY_MEANING[mode] },
    services: {
      hinted: doc.services.length + doc.invalid.length,
      programmed: doc.services.length,
      refused: doc.invalid.length,
      ...(input.offloaded === undefined ? {} : { offloadedConnections: input.offloaded }),
    },
    notOffloadable: all.slice(0, NOT_OFFLOADABLE_MAX),
    notOffloadableTotal: all.length,
    ...(ls
      ? {
          lastSync: {
            time: ls.at,
            kind: ls.kind,
            result: ls.ok ? 'Succeeded' : 'Failed',
            ...(ls.error === undefined ? {} : { error: ls.error.slice(0, 500) }),
          },
        }
      : {}),
  };
}

/** What a reader would see change: everything but the last sync's time and the offloaded count. */
export function visiblePart(s: FlowhintNodeStatus): string {
  const { lastSync, services, ...rest } = s;
  const { offloadedConnections: _volatile, ...counts } = services;
  const sync = lastSync && { kind: lastSync.kind, result: lastSync.result, error: lastSync.error };
  return JSON.stringify({ ...rest, counts, sync });
}

/** The fields refreshed at most once a minute. */
export function volatilePart(s: FlowhintNodeStatus): string {
  return JSON.stringify([s.lastSync?.time, s.services.offloadedConnections]);
}

/**
 * The whole agent (controller, KubeSource, nft in a scratch netns) against the list/watch
 * FAKE API server, with the production backoffs unless a test says otherwise. For fault
 * tests that watch the programmed ruleset while the API server misbehaves, and time how
 * long the table takes to converge once it recovers.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { Agent } from '../../agent/agent.ts';
import { createAgentMetrics } from '../../agent/report/metrics.ts';
import { makeNft } from '../../agent/nft/nft.ts';
import { KubeSource } from '../../agent/sources/kube.ts';
import { silentLogger } from '../../lib/log.ts';
import { FakeApiServer } from './fake-apiserver.ts';
import { FakeFlowhintNodes } from './fake-flowhintnodes.ts';
import { kubeNodeStatusApi } from '../../agent/report/node-api.ts';
import { NodeStatusWriter } from '../../agent/report/node-writer.ts';
import { fakeKubeConfig } from './fake-kube.ts';
import { createNetns, type Netns } from './netns.ts';
import { svc, type SvcSpec } from './agent.ts';
import { expectOffloads, offloads, viewText } from './table-view.ts';
import { list } from './netns-agent.ts';

export interface KubeAgent {
  api: FakeApiServer;
  /** The FAKE's Nodes (node-a) and FlowhintNodes, which the agent's writer reports to. */
  fhn: FakeFlowhintNodes;
  nodeStatus: NodeStatusWriter;
  agent: Agent;
  ns: Netns;
  /** flowhint's three tables as `nft list table` prints them, byte for byte (counters left out). */
  table(): string;
  /** Whether the table does exactly what these Services ask for (read from nft, not from the agent). */
  converged(want: Expected): Promise<boolean>;
  /** Poll `converged` until true; the time it took in ms (a liveness deadline, not a target). */
  timeToConverge(want: Expected, deadlineMs: number): Promise<number>;
  restarts(): number;
}

/** namespace/name -> the Service's (one) address and TCP port. */
export type Expected = Record<string, { addr: string; port: number }>;

export interface KubeAgentOptions {
  resyncMs?: number;
  syncBackoff?: { initialMs: number; maxMs: number };
  nftBinary?: string;
  /** The FlowhintNode writer's timings (default: production's). */
  nodeStatus?: {
    minIntervalMs?: number;
    refreshMs?: number;
    requestTimeoutMs?: number;
    backoff?: { initialMs: number; maxMs: number };
  };
}

/** A hinted Service object as the API server stores it (admitted: annotation and label). */
export function apiService(s: SvcSpec): Parameters<FakeApiServer['apply']>[0] {
  return svc({ namespace: 'demo', ...s }) as Parameters<FakeApiServer['apply']>[0];
}

export async function startKubeAgent(
  t: { teardown: (fn: () => Promise<void> | void) => void },
  o: KubeAgentOptions = {},
): Promise<KubeAgent> {
  const api = new FakeApiServer();
  await api.start();
  const ns = createNetns();
  const metrics = createAgentMetrics({ defaultMetrics: false });
  const fhn = new FakeFlowhintNodes(api);
  fhn.addNode('node-a');
  const source = new KubeSource({ kubeConfig: fakeKubeConfig(api.url), logger: silentLogger() });
  const nodeStatus = new NodeStatusWriter({
    api: kubeNodeStatusApi(fakeKubeConfig(api.url)),
    node: 'node-a',
    log: silentLogger(),
    ...o.nodeStatus,
  });
  const agent = new Agent({
    run: ns.run,
    nft: makeNft(ns.run, o.nftBinary),
    source,
    logger: silentLogger(),
    metrics,
    defaultThreshold: 20,
    devices: {},
    counter: true,
    ...(o.resyncMs ? { resyncMs: o.resyncMs } : {}),
    ...(o.syncBackoff ? { backoff: o.syncBackoff } : {}),
    nodeStatus,
  });
  t.teardown(async () => {
    await agent.stop();
    fhn.release();
    await api.stop();
    ns.destroy();
  });
  const nft = makeNft(ns.run);
  const converged = async (want: Expected) => {
    // This kernel has no flowtables: the rules carry no `flow add` (degraded mode).
    const expected = expectOffloads(
      Object.values(want).map((w) => ({ addrs: [w.addr], ports: [{ port: w.port }] })),
      false,
    );
    return agent.lastSync?.ok === true && viewText(offloads(await nft.read())) === viewText(expected);
  };
  return {
    api,
    fhn,
    nodeStatus,
    agent,
    ns,
    table: () => list(ns),
    converged,
    async timeToConverge(want, deadlineMs) {
      const start = Date.now();
      while (!(await converged(want))) {
        if (Date.now() - start > deadlineMs)
          throw new Error(`not converged on ${JSON.stringify(want)} within ${deadlineMs} ms`);
        await sleep(50);
      }
      return Date.now() - start;
    },
    restarts: () => source.restarts,
  };
}

export type OutageMode = 'refused' | 'unresponsive';

export interface OutageResult {
  samples: number;
  differing: number;
  /** Syncs (the periodic full resyncs) that ran during the outage, as sampled. */
  resyncsDuring: number;
  restartsDuring: number;
  watchRequestsDuring: number;
  recoveryMs: number;
}

/**
 * Program two Services, take the API server away for `seconds` (refusing connections, or
 * accepting and never answering), change the Services meanwhile (one deleted, one changed,
 * one added), sample the table every 5 s, bring the API server back, and time convergence.
 */
export async function runOutage(
  t: { teardown: (fn: () => Promise<void> | void) => void },
  mode: OutageMode,
  seconds: number,
): Promise<OutageResult> {
  // Several periodic full resyncs fall inside the outage, however short it is.
  const k = await startKubeAgent(t, { resyncMs: Math.min(20_000, (seconds * 1000) / 4) });
  k.api.apply(apiService({ name: 'k', clusterIPs: ['10.96.1.1'], ports: [{ port: 80 }] }));
  k.api.apply(apiService({ name: 'l', clusterIPs: ['10.96.1.2'], ports: [{ port: 80 }] }));
  await k.agent.prepare();
  k.agent.startLoops();
  await k.timeToConverge(
    { 'demo/k': { addr: '10.96.1.1', port: 80 }, 'demo/l': { addr: '10.96.1.2', port: 80 } },
    30_000,
  );
  const before = k.table();
  const restarts0 = k.restarts();
  const watches = () => k.api.requests.filter((r) => r.query.watch === 'true').length;
  const watches0 = watches();
  if (mode === 'refused') await k.api.pause();
  else k.api.unresponsive();
  // What changes while the agent cannot see it; after a refusal (an API server restart) the
  // history is gone too, so the agent's watch gets 410 Gone and it must relist.
  k.api.delete('demo', 'k');
  k.api.apply(apiService({ name: 'l', clusterIPs: ['10.96.1.2'], ports: [{ port: 8080 }] }));
  k.api.apply(apiService({ name: 'm', clusterIPs: ['10.96.1.3'], ports: [{ port: 443 }] }));
  if (mode === 'refused') k.api.compact();
  const syncBefore = k.agent.lastSync?.at;
  const syncTimes = new Set<string>();
  let samples = 0;
  let differing = 0;
  const end = Date.now() + seconds * 1000;
  while (Date.now() < end) {
    await sleep(Math.min(5000, Math.max(0, end - Date.now())));
    samples += 1;
    if (k.table() !== before) differing += 1;
    const at = k.agent.lastSync?.at;
    if (at && at !== syncBefore) syncTimes.add(at);
  }
  const restartsDuring = k.restarts() - restarts0;
  const watchRequestsDuring = watches() - watches0;
  if (mode === 'refused') await k.api.resume();
  else k.api.respond();
  const recoveryMs = await k.timeToConverge(
    { 'demo/l': { addr: '10.96.1.2', port: 8080 }, 'demo/m': { addr: '10.96.1.3', port: 443 } },
    120_000,
  );
  return { samples, differing, resyncsDuring: syncTimes.size, restartsDuring, watchRequestsDuring, recoveryMs };
}

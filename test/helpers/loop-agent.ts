/**
 * The agent's loop without root, shared by test/agent/loop*.test.ts: a source the test drives,
 * the Agent against the FAKE nft and host (test/helpers/fake-nft.ts), and what the table must do
 * for a list of Services, written from the Services (test/helpers/table-view.ts).
 */
import { Agent, type AgentOptions } from '../../agent/agent.ts';
import { createAgentMetrics, type AgentMetrics } from '../../agent/report/metrics.ts';
import type { Source, SourceSink } from '../../agent/sources/source.ts';
import type { Transaction } from '../../agent/nft/transaction.ts';
import { FakeNft, fakeHost } from './fake-nft.ts';
import { expectOffloads, type PortSpec } from './table-view.ts';
import { svc } from './agent.ts';
import { capturedLogs } from './logs.ts';
import { eventually } from './eventually.ts';

/** A source the test drives: Services in, as a list/watch source would deliver them. */
export class TestSource implements Source {
  readonly name = 'test';
  private sink: SourceSink | undefined;
  private readonly initial: Array<Record<string, unknown>>;
  constructor(initial: Array<Record<string, unknown>>) {
    this.initial = initial;
  }
  async start(sink: SourceSink): Promise<void> {
    this.sink = sink;
    sink.events(this.initial.map((object) => ({ type: 'upsert', key: key(object), object })));
    sink.synced();
  }
  async stop(): Promise<void> {}
  upsert(object: Record<string, unknown>): void {
    this.sink?.events([{ type: 'upsert', key: key(object), object }]);
  }
  remove(name: string): void {
    this.sink?.events([{ type: 'delete', key: `default/${name}` }]);
  }
}

export const key = (o: Record<string, unknown>) => `default/${(o.metadata as { name: string }).name}`;

export interface Svc {
  name: string;
  addr: string;
  ports: PortSpec[];
}

export const service = (s: Svc) =>
  svc({
    name: s.name,
    clusterIPs: [s.addr],
    ports: s.ports.map((p) => ({ port: p.port, protocol: (p.proto ?? 'tcp').toUpperCase() })),
    ...(s.ports[0]?.threshold !== undefined ? { threshold: String(s.ports[0].threshold) } : {}),
  });

/** What the table must do for these Services (node address 192.0.2.10 has no NodePorts here). */
export const expected = (list: Svc[]) => expectOffloads(list.map((s) => ({ addrs: [s.addr], ports: s.ports })));

export function makeAgent(
  nft: FakeNft,
  source: Source,
  extra: Partial<AgentOptions> = {},
): { agent: Agent; metrics: AgentMetrics; lines: Array<Record<string, unknown>> } {
  const metrics = createAgentMetrics({ defaultMetrics: false });
  const { logger, lines } = capturedLogs();
  const agent = new Agent({
    run: fakeHost(nft),
    nft,
    source,
    logger,
    metrics,
    defaultThreshold: 20,
    devices: {},
    counter: true,
    backoff: { initialMs: 5, maxMs: 20 },
    minSyncIntervalMs: 1,
    // Devices join at once here; loop-host.test.ts settles them on a fake clock.
    deviceSettleMs: 0,
    ...extra,
  });
  return { agent, metrics, lines };
}

/**
 * An agent over `nft` that has synced `source` once (`first`), with its host poll and the
 * flowtable's devices (sorted) at hand: for the device tests.
 */
export async function syncedAgent(nft: FakeNft, source: Source, extra: Partial<AgentOptions> = {}) {
  const made = makeAgent(nft, source, extra);
  const poll = () => (made.agent as unknown as { pollHost(): Promise<void> }).pollHost();
  const held = () => [...(nft.table?.flowtables.get('fastpath')?.devices ?? [])].sort();
  await made.agent.prepare();
  const first = await made.agent.sync();
  return { ...made, poll, held, first };
}

/** An agent running its loops (sync runner, timers), its first full sync done. */
export async function runningAgent(nft: FakeNft, source: Source, extra: Partial<AgentOptions> = {}) {
  const made = makeAgent(nft, source, extra);
  await made.agent.prepare();
  made.agent.startLoops();
  await eventually('first full sync', () => made.agent.lastSync?.ok === true);
  return made;
}

export async function metric(m: AgentMetrics, name: string): Promise<string> {
  return m.registry.getSingleMetricAsString(name);
}

/** A full transaction starts by (re)declaring the table; partial ones never do. */
export const isFull = (tx: Transaction) => tx[0]?.verb === 'add' && tx[0].obj.type === 'table';
export const flowtableOps = (tx: Transaction) => tx.filter((op) => op.obj.type === 'flowtable');

export const A: Svc = { name: 'a', addr: '10.96.0.10', ports: [{ port: 80 }] };
export const B: Svc = { name: 'b', addr: '10.96.0.11', ports: [{ port: 443, threshold: 500 }] };

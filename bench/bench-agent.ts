/** The real agent as the agent benchmarks run it: inside the namespace they start it in, fed by hand. */
import { Agent } from '../agent/agent.ts';
import { createAgentMetrics } from '../agent/report/metrics.ts';
import { makeNft } from '../agent/nft/nft.ts';
import type { Source, SourceSink } from '../agent/sources/source.ts';
import { makeRunner, type Runner } from '../lib/exec.ts';
import { silentLogger } from '../lib/log.ts';

/** A source the bench drives by hand. */
export class ManualSource implements Source {
  readonly name = 'bench';
  sink: SourceSink | undefined;
  async start(sink: SourceSink): Promise<void> {
    this.sink = sink;
    sink.synced();
  }
  async stop(): Promise<void> {}
}

/** A prepared agent on `source`, calling nft and conntrack directly (the process runs inside the namespace). */
export async function preparedAgent<S extends Source>(source: S): Promise<{ agent: Agent; source: S; run: Runner }> {
  const run = makeRunner([]);
  const agent = new Agent({
    run,
    nft: makeNft(run),
    source,
    logger: silentLogger(),
    metrics: createAgentMetrics({ defaultMetrics: false }),
    defaultThreshold: 20,
    devices: {},
    counter: true,
    nodeAddresses: [],
  });
  await agent.prepare();
  return { agent, source, run };
}

/** A prepared agent fed by hand. */
export const benchAgent = () => preparedAgent(new ManualSource());

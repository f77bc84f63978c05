/**
 * `flowhint agent`, `flowhint status`, `flowhint cleanup`.
 *
 * `--netns NAME` runs every host tool (nft, ip, sysctl, conntrack) through
 * `ip netns exec NAME`, so the agent can program a scratch namespace without entering it.
 */
import { hostname } from 'node:os';
import { z } from 'zod';
import { netnsName, parseFlags } from '../lib/cli.ts';
import { FlowhintError } from '../lib/errors.ts';
import { netnsRunner } from '../lib/exec.ts';
import { deadline as timeLimit, stopSignals } from '../lib/process.ts';
import { flowhintVersion } from '../lib/version.ts';
import { acquireInstanceLock } from '../lib/instance-lock.ts';
import { createLogger } from '../lib/log.ts';
import { Agent } from './agent.ts';
import { requireNetns } from './host/netns.ts';
import { createAgentMetrics } from './report/metrics.ts';
import { makeNft } from './nft/nft.ts';
import { DELETE_TABLE } from './nft/render.ts';
import { restoreAccounting } from './host/accounting.ts';
import { DEFAULT_STATE_DIR } from './report/status.ts';
import { FileSource } from './sources/files.ts';
import { AGENT_FLAGS, AGENT_USAGE, AgentFlags } from './cli-flags.ts';
import { NodeStatusWriter } from './report/node-writer.ts';
import type { Logger } from 'pino';

export async function agentCommand(argv: string[]): Promise<number> {
  const f = parseFlags(argv, AGENT_FLAGS, AgentFlags, AGENT_USAGE);
  // One agent per network namespace it programs: a second one refuses to start.
  const lock = await acquireInstanceLock(`flowhint-agent:${f.netns ?? 'host'}`);
  const logger = createLogger('flowhint-agent');
  // SIGTERM and SIGINT end the agent in every state: during start-up, a hung first list, --once.
  const signals = stopSignals();
  const closers: Array<() => Promise<unknown>> = [() => lock.release()];
  try {
    if (f.netns) await requireNetns(f.netns);
    const metrics = createAgentMetrics();
    // The agent, once made: the readiness probe answers from it.
    const made: { agent?: Agent } = {};
    let metricsUrl: string | undefined;
    // Listen before anything starts, so a port in use fails the start with nothing left running.
    if (!f.once) {
      const { startMetricsServer } = await import('../lib/metrics-server.ts');
      const server = await startMetricsServer({
        registry: metrics.registry,
        host: f['metrics-host'],
        port: f['metrics-port'],
        probes: {
          '/healthz': () => ({ ok: true }),
          '/readyz': () => ({ ok: made.agent?.lastSync?.ok === true, detail: made.agent?.lastSync ?? 'no sync yet' }),
        },
      });
      closers.push(() => server.close());
      const addr = server.server.address();
      metricsUrl = typeof addr === 'object' && addr ? `http://${f['metrics-host']}:${addr.port}/metrics` : undefined;
    }
    const run = netnsRunner(f.netns);
    // @kubernetes/client-node is large; load it only when Services come from the API server.
    const nodeName = f['node-name'] ?? (process.env.NODE_NAME || hostname());
    const { source, nodeStatus } = f['services-dir']
      ? { source: new FileSource({ dir: f['services-dir'], logger: logger.child({ source: 'files' }) }) }
      : await kubeParts(f, nodeName, logger, () => metrics.informerRestarts.inc());
    const running = new Agent({
      run,
      nft: makeNft(run),
      source,
      logger,
      metrics,
      defaultThreshold: f['offload-after-packets'],
      defaultTimeout: f['short-lived-timeout'],
      devices: { include: f.devices, exclude: f['exclude-devices'] },
      nodeAddresses: f['node-address'],
      counter: !f['no-flowtable-counter'],
      ctMark: f['ct-mark-bit'],
      shortMark: f['short-lived-mark-bit'],
      stateDir: f['state-dir'],
      resyncMs: f['resync-seconds'] * 1000,
      nodeStatus,
    });
    made.agent = running;
    // One stop, whichever path asks first: a failed start keeps the rules, a clean stop may clean up.
    let stopping: Promise<void> | undefined;
    const stop = (cleanup: boolean) => (stopping ??= running.stop({ cleanup }));
    closers.push(() => stop(false));
    const deadline = f.once
      ? timeLimit(
          f['once-timeout'],
          () =>
            new FlowhintError(
              'FH_ONCE_TIMEOUT',
              running.lastSync
                ? `not done within --once-timeout ${f['once-timeout']}s: the sync ended (${running.lastSync.ok ? 'ok' : 'failed'}), marking live connections did not`
                : `no sync within --once-timeout ${f['once-timeout']}s (the source never delivered its first state)`,
            ),
        )
      : undefined;
    const work = async () => {
      await running.prepare();
      if (!f.once) return undefined;
      const r = await running.sync();
      await running.marked();
      await running.refreshOffloadMetrics().catch(() => undefined);
      return r;
    };
    const startLine = {
      version: flowhintVersion(),
      source: source.name,
      node: nodeName,
      netns: f.netns,
      metrics: metricsUrl,
    };
    logger.info(startLine, f.once ? 'agent starting (--once)' : 'agent starting');
    const started = work();
    started.catch(() => undefined); // raced below; a late failure after a signal is not unhandled
    const outcome = await Promise.race([started, signals.signal, ...(deadline ? [deadline.expired] : [])]).finally(() =>
      deadline?.cancel(),
    );
    if (typeof outcome === 'string') {
      logger.info({ signal: outcome }, 'stopping during start-up');
      return 0;
    }
    if (outcome) {
      await stop(f['cleanup-on-exit']);
      logger.info({ ok: outcome.ok, kind: outcome.kind, mode: running.statusDoc().node.mode }, 'agent --once done');
      return outcome.ok ? 0 : 1;
    }
    running.startLoops();
    const signal = await signals.signal;
    logger.info({ signal }, 'stopping watches');
    await stop(f['cleanup-on-exit']);
    return 0;
  } finally {
    signals.off();
    for (const close of closers.reverse()) await close().catch(() => undefined);
  }
}

/**
 * With the API server: the Service source, and (except with --once) this node's
 * FlowhintNode writer. @kubernetes/client-node is large; it is loaded only here.
 */
async function kubeParts(f: z.infer<typeof AgentFlags>, nodeName: string, logger: Logger, onRestart: () => void) {
  const [{ KubeSource }, { loadKubeConfig }, { kubeNodeStatusApi }] = await Promise.all([
    import('./sources/kube.ts'),
    import('../lib/kubeconfig.ts'),
    import('./report/node-api.ts'),
  ]);
  const kubeConfig = loadKubeConfig(f.kubeconfig);
  const source = new KubeSource({
    kubeConfig,
    logger: logger.child({ source: 'kubernetes' }),
    onRestart,
    failFast: f.once,
  });
  const nodeStatus = f.once
    ? undefined
    : new NodeStatusWriter({ api: kubeNodeStatusApi(kubeConfig), node: nodeName, log: logger });
  return { source, nodeStatus };
}

export async function cleanupCommand(argv: string[]): Promise<number> {
  const f = parseFlags(
    argv,
    {
      netns: { type: 'string', value: 'NAME', help: 'the named network namespace (ip netns) instead of the host' },
      'state-dir': {
        type: 'string',
        value: 'DIR',
        help: "the agent's --state-dir, where it recorded nf_conntrack_acct as it found it",
        default: DEFAULT_STATE_DIR,
      },
    },
    z.object({
      netns: netnsName,
      'state-dir': z.string().default(DEFAULT_STATE_DIR),
    }),
    'usage: flowhint cleanup [--netns NAME] [--state-dir DIR]',
  );
  // Without this, `ip netns exec` on a missing namespace fails with "No such file or
  // directory", which reads like a missing table: "nothing to clean up", exit 0.
  if (f.netns) await requireNetns(f.netns);
  const run = netnsRunner(f.netns);
  const nft = makeNft(run);
  if ((await nft.read()) === undefined) {
    process.stderr.write('flowhint: no table flowhint (inet, ip, ip6) exists; nothing to clean up\n');
  } else {
    await nft.apply(DELETE_TABLE);
    process.stderr.write('flowhint: deleted the tables inet, ip and ip6 flowhint\n');
  }
  process.stderr.write(`flowhint: ${await restoreAccounting(run, f['state-dir'])}\n`);
  return 0;
}

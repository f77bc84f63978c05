/**
 * Hinted Services from the API server: a @kubernetes/client-node informer on
 * `/api/v1/services`, with the label selector `flowhint.dev/traffic-hint`, so the API
 * server sends this node only hinted Services; the list call passes the same selector.
 *
 * The library re-lists on 410 Gone and re-watches a cleanly closed or silent (30 s) watch
 * itself, but stops the informer on any other error (a 500, a reset or refused connection, a
 * failed list). We restart it with exponential backoff, capped at 10 s so that a node
 * converges within seconds of the API server's recovery, with ±20 % jitter so that a
 * cluster's nodes do not retry in step; and count the restarts.
 */
import { CoreV1Api, KubeConfig, makeInformer, type Informer, type KubernetesObject, type ObjectCache, type V1Service } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { HINT_LABEL } from '../../api/index.ts';
import { errorMessage } from '../../lib/errors.ts';
import { objectKey, type Source, type SourceSink } from './source.ts';

export interface KubeSourceOptions {
  kubeConfig: KubeConfig;
  logger: Logger;
  onRestart?: (reason: string) => void;
  backoff?: { initialMs: number; maxMs: number };
}

/** In-cluster when running in a Pod, else `KUBECONFIG` or ~/.kube/config. */
export function loadKubeConfig(kubeconfigPath?: string): KubeConfig {
  const kc = new KubeConfig();
  if (kubeconfigPath) kc.loadFromFile(kubeconfigPath);
  else kc.loadFromDefault();
  return kc;
}

export class KubeSource implements Source {
  readonly name = 'kubernetes';
  private readonly o: KubeSourceOptions;
  private informer: (Informer<V1Service> & ObjectCache<V1Service>) | undefined;
  private stopped = false;
  private restartTimer: NodeJS.Timeout | undefined;
  private delayMs: number;
  restarts = 0;

  constructor(o: KubeSourceOptions) {
    this.o = o;
    this.delayMs = o.backoff?.initialMs ?? 1000;
  }

  async start(sink: SourceSink): Promise<void> {
    const api = this.o.kubeConfig.makeApiClient(CoreV1Api);
    let synced = false;
    const list = async () => {
      const result = await api.listServiceForAllNamespaces({ labelSelector: HINT_LABEL });
      if (!synced) {
        synced = true;
        // The informer adds the listed items right after this resolves; report after them.
        setImmediate(() => sink.synced());
      }
      return result;
    };
    const informer = makeInformer<V1Service>(this.o.kubeConfig, '/api/v1/services', list, HINT_LABEL);
    this.informer = informer;
    const upsert = (obj: KubernetesObject) => {
      const key = objectKey(obj);
      if (key) sink.events([{ type: 'upsert', key, object: obj }]);
    };
    informer.on('add', upsert);
    informer.on('update', upsert);
    informer.on('delete', (obj) => {
      const key = objectKey(obj);
      if (key) sink.events([{ type: 'delete', key }]);
    });
    informer.on('connect', () => {
      // Reset the backoff once a watch is established again.
      this.delayMs = this.o.backoff?.initialMs ?? 1000;
    });
    informer.on('error', (err: unknown) => {
      if (this.stopped) return;
      const reason = errorMessage(err);
      const delay = Math.round(this.delayMs * (0.8 + Math.random() * 0.4));
      this.delayMs = Math.min(this.delayMs * 2, this.o.backoff?.maxMs ?? 10_000);
      this.restarts += 1;
      this.o.onRestart?.(reason);
      this.o.logger.warn({ err: reason, retryInMs: delay, restarts: this.restarts }, 'service informer stopped; restarting');
      this.restartTimer = setTimeout(() => {
        if (!this.stopped) void informer.start().catch(() => {});
      }, delay);
    });
    // start() resolves once the first list is in and the watch is open; a failing first
    // list goes through the error handler above and is retried.
    await informer.start().catch(() => {});
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.restartTimer) clearTimeout(this.restartTimer);
    await this.informer?.stop();
  }
}

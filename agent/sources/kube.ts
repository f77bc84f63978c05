/**
 * Hinted Services from the API server: a @kubernetes/client-node informer on
 * `/api/v1/services`, with the label selector `flowhint.dev/traffic-hint`, so the API
 * server sends this node only hinted Services; the list call passes the same selector.
 *
 * The library re-lists on 410 Gone and re-watches a cleanly closed or silent (30 s) watch
 * itself, but stops the informer on any other error (a 500, a reset or refused connection, a
 * failed list). We restart it with exponential backoff, capped at 10 s so that a node
 * converges within seconds of the API server's recovery, with ±20 % jitter so that a
 * cluster's nodes do not retry in step; and count the restarts. The backoff starts over
 * only after two quiet minutes (as client-go's reflector does), not on a reconnect: the
 * library signals `connect` before its list, so a list that then fails again would
 * otherwise retry every second for the whole outage.
 *
 * Watches have a client-side deadline in the library (30 s without data); lists have none
 * but undici's 300 s headers timeout. An API server that accepts and never answers (an
 * overloaded one, or a connection cut without a reset) would hold the agent for 5 minutes
 * after it recovered, so the list gets the same 30 s deadline.
 */
import {
  CoreV1Api,
  KubeConfig,
  makeInformer,
  type Informer,
  type KubernetesObject,
  type ObjectCache,
  type V1Service,
} from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { HINT_LABEL } from '../../api/index.ts';
import { Backoff } from '../../lib/backoff.ts';
import { FlowhintError, errorMessage } from '../../lib/errors.ts';
import { deadline } from '../../lib/kube-request.ts';
import { objectKey, type Source, type SourceSink } from './source.ts';

export interface KubeSourceOptions {
  kubeConfig: KubeConfig;
  logger: Logger;
  onRestart?: (reason: string) => void;
  /** A failing first list fails start-up (`agent --once`) instead of being retried. */
  failFast?: boolean;
  /** Restart backoff; it starts over after `resetMs` without errors. */
  backoff?: { initialMs: number; maxMs: number; resetMs?: number };
  /** Client-side deadline of a list request. */
  listTimeoutMs?: number;
}

const DEFAULT_BACKOFF = { initialMs: 1000, maxMs: 10_000, resetMs: 120_000 };
const DEFAULT_LIST_TIMEOUT_MS = 30_000;

export class KubeSource implements Source {
  readonly name = 'kubernetes';
  private readonly o: KubeSourceOptions;
  private informer: (Informer<V1Service> & ObjectCache<V1Service>) | undefined;
  private stopped = false;
  private restartTimer: NodeJS.Timeout | undefined;
  private readonly backoff: Backoff;
  restarts = 0;

  constructor(o: KubeSourceOptions) {
    this.o = o;
    this.backoff = new Backoff({ ...DEFAULT_BACKOFF, ...o.backoff });
  }

  async start(sink: SourceSink): Promise<void> {
    const api = this.o.kubeConfig.makeApiClient(CoreV1Api);
    let synced = false;
    const list = async () => {
      const result = await api.listServiceForAllNamespaces(
        { labelSelector: HINT_LABEL },
        deadline(this.o.listTimeoutMs ?? DEFAULT_LIST_TIMEOUT_MS),
      );
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
    informer.on('error', (err: unknown) => {
      if (this.stopped) return;
      const reason = errorMessage(err);
      if (!synced && this.o.failFast) {
        this.stopped = true;
        sink.failed?.(new FlowhintError('FH_API_UNREACHABLE', `cannot list Services: ${reason}`));
        return;
      }
      const delay = this.backoff.next();
      this.restarts += 1;
      this.o.onRestart?.(reason);
      this.o.logger.warn(
        { err: reason, retryInMs: delay, restarts: this.restarts },
        'service informer stopped; restarting',
      );
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

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
 * after it recovered, so each list request gets the same 30 s deadline.
 *
 * The list is read in pages of 500 (`limit`/`continue`, as client-go's reflector does): a
 * single list of 10,000 Services as the API server stores them is about 22 MB of JSON, which
 * the library holds as text, parsed and deserialized all at once (bench:agent measured the
 * agent's RSS at 373 MiB, over the DaemonSet's limit). Pages of one consistent snapshot give
 * the informer the same list; each page is cut down before the next arrives.
 *
 * The informer keeps every hinted Service of the cluster for as long as the agent runs. As the
 * API server sends them they are mostly fields flowhint never reads (managedFields, kubectl's
 * last-applied-configuration, selectors, status), so each object is cut down in place, in the
 * informer's own cache, to `serviceView` (api/service-view.ts) as it arrives. The library
 * reads only metadata's name, namespace and resourceVersion of what it caches, which the
 * view keeps.
 */
import {
  CoreV1Api,
  KubeConfig,
  makeInformer,
  type Informer,
  type KubernetesObject,
  type ObjectCache,
  type V1Service,
  type V1ServiceList,
} from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { HINT_LABEL, serviceView } from '../../api/index.ts';
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
  /** Client-side deadline of a list request (each page's). */
  listTimeoutMs?: number;
  /** Services per list page (`limit`). */
  listPage?: number;
  /**
   * Cut cached objects down to what flowhint reads (default). `false` keeps them whole: only
   * for bench:agent's side-by-side baseline.
   */
  view?: boolean;
}

const DEFAULT_BACKOFF = { initialMs: 1000, maxMs: 10_000, resetMs: 120_000 };
const DEFAULT_LIST_TIMEOUT_MS = 30_000;
/** As client-go's reflector pages its lists. */
export const LIST_PAGE = 500;

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
      const result = await this.listInPages(api);
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
      if (this.o.view !== false) keepOnlyView(obj);
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

  /**
   * The hinted Services in pages of LIST_PAGE, each page cut down to the view before the next
   * is asked for, as one list (the resourceVersion of its consistent snapshot). An expired
   * continue token fails the list like any other error: the informer restarts and lists
   * again from the first page.
   */
  private async listInPages(api: CoreV1Api): Promise<V1ServiceList> {
    const items: V1Service[] = [];
    let last: V1ServiceList | undefined;
    let cont: string | undefined;
    do {
      last = await api.listServiceForAllNamespaces(
        { labelSelector: HINT_LABEL, limit: this.o.listPage ?? LIST_PAGE, ...(cont ? { _continue: cont } : {}) },
        deadline(this.o.listTimeoutMs ?? DEFAULT_LIST_TIMEOUT_MS),
      );
      for (const s of last.items) items.push(this.o.view === false ? s : (serviceView(s) as V1Service));
      cont = last.metadata?._continue || undefined;
    } while (cont);
    // The last page carries the snapshot's resourceVersion and no continue token.
    last.items = items;
    return last;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.restartTimer) clearTimeout(this.restartTimer);
    await this.informer?.stop();
  }
}

/** The informer's cached object cut down, in place, to what flowhint reads. */
export function keepOnlyView(obj: KubernetesObject): void {
  const view = serviceView(obj);
  if (view === obj) return;
  const target = obj as Record<string, unknown>;
  for (const k of Object.keys(target)) Reflect.deleteProperty(target, k);
  Object.assign(target, view);
}

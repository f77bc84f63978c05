/**
 * Writing this node's `FlowhintNode`: best effort, off the sync path, bounded.
 *
 * - A write is one server-side apply of the status (field manager `flowhint-agent`). The
 *   object itself (name, owner reference to the Node, read once for its uid) is applied
 *   first, and again whenever the status subresource answers 404 (the object was deleted).
 * - When a reader would see a change (node-status.ts's visible part); for the last sync's
 *   time and the offloaded count alone, at most once per `refreshMs` (a minute); and, quiet
 *   or not, once per `heartbeatMs` (HEARTBEAT_SECONDS) after the last write, with
 *   `heartbeatTime` set: how a reader (`flowhint explain`) tells a live agent from a dead
 *   one. A busy node writes at most once per `minIntervalMs`.
 * - Runs through lib/bounded-runner.ts: never two writes at once; a failed write is retried
 *   after the shared backoff (lib/backoff.ts), up to minutes apart. Every request has a
 *   deadline and `stop()` aborts the one in flight, so a hung API server holds nothing.
 * - Failures are logged once per kind (the CRD not installed, the Node not found, a
 *   conflict, anything else) until a write succeeds again. Programming never waits on any
 *   of this: the agent only calls `request()`.
 */
import type { Logger } from 'pino';
import { HEARTBEAT_SECONDS, type FlowhintNodeStatus } from '../../api/index.ts';
import { Backoff } from '../../lib/backoff.ts';
import { BoundedRunner } from '../../lib/bounded-runner.ts';
import { realClock, type Clock } from '../../lib/clock.ts';
import { Conditions } from '../../lib/conditions.ts';
import { errorMessage, httpStatus } from '../../lib/errors.ts';
import { visiblePart, volatilePart } from './node-status.ts';

/** The API calls this needs (node-api.ts over @kubernetes/client-node; fakes in tests). */
export interface NodeStatusApi {
  /** The Node's uid, for the owner reference. */
  nodeUid(node: string, signal: AbortSignal): Promise<string>;
  /** Apply the object: name and owner reference. */
  applyObject(node: string, nodeUid: string, signal: AbortSignal): Promise<void>;
  /** Apply the status subresource. */
  applyStatus(node: string, status: FlowhintNodeStatus, signal: AbortSignal): Promise<void>;
}

export interface NodeWriterOptions {
  api: NodeStatusApi;
  node: string;
  log: Logger;
  clock?: Clock;
  /** Least time between two writes. */
  minIntervalMs?: number;
  /** Volatile fields alone are written at most this often. */
  refreshMs?: number;
  /** A write, changed or not, this long after the last one (the heartbeat). */
  heartbeatMs?: number;
  /** Deadline of each request. */
  requestTimeoutMs?: number;
  backoff?: { initialMs: number; maxMs: number };
}

/** Thrown for a 404 on the Node: `--node-name` names no node. */
class NodeNotFound extends Error {}

export class NodeStatusWriter {
  private readonly o: NodeWriterOptions;
  private readonly clock: Clock;
  private readonly runner: BoundedRunner;
  private readonly conditions = new Conditions();
  private read: (() => FlowhintNodeStatus) | undefined;
  private refreshTimer: unknown;
  private heartbeatTimer: unknown;
  private heartbeatDue = false;
  private abort = new AbortController();
  private objectApplied = false;
  private uid: string | undefined;
  private written: { visible: string; volatile: string; at: number } | undefined;
  private stopped = false;
  /** Status writes that reached the API server. */
  writes = 0;

  constructor(o: NodeWriterOptions) {
    this.o = o;
    this.clock = o.clock ?? realClock;
    this.runner = new BoundedRunner({
      minIntervalMs: o.minIntervalMs ?? 10_000,
      backoff: new Backoff({ ...(o.backoff ?? { initialMs: 5_000, maxMs: 300_000 }), clock: this.clock }),
      run: () => this.writeIfDue(),
      clock: this.clock,
    });
  }

  /** Start writing what `read` returns: now, on `request()`, and every `refreshMs` if volatile fields changed. */
  start(read: () => FlowhintNodeStatus): void {
    this.read = read;
    this.runner.start();
    this.runner.request();
    const refresh = () => {
      this.refreshTimer = this.clock.setTimeout(() => {
        this.runner.request();
        refresh();
      }, this.refreshMs);
    };
    refresh();
  }

  /** Something changed: write if a reader would see it. */
  request(): void {
    if (this.read) this.runner.request();
  }

  /** Stop: no more writes; the request in flight is aborted. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.refreshTimer !== undefined) this.clock.clearTimeout(this.refreshTimer);
    if (this.heartbeatTimer !== undefined) this.clock.clearTimeout(this.heartbeatTimer);
    this.abort.abort();
    await this.runner.stop();
  }

  private get refreshMs(): number {
    return this.o.refreshMs ?? 60_000;
  }

  /** One run: nothing due is a success; a failed write is a failure (the runner backs off). */
  private async writeIfDue(): Promise<boolean> {
    if (this.stopped || !this.read) return true;
    const status = this.read();
    const visible = visiblePart(status);
    const volatile = volatilePart(status);
    const now = this.clock.now();
    const w = this.written;
    const due =
      !w || w.visible !== visible || (w.volatile !== volatile && now - w.at >= this.refreshMs) || this.heartbeatDue;
    if (!due) return true;
    try {
      await this.write({ ...status, heartbeatTime: new Date(now).toISOString() });
    } catch (err) {
      this.failed(err);
      return false;
    }
    this.written = { visible, volatile, at: now };
    this.writes += 1;
    this.armHeartbeat(now);
    if (this.conditions.changed('write', 'ok'))
      this.o.log.info({ flowhintNode: this.o.node }, 'FlowhintNode status written');
    return true;
  }

  /** The next heartbeat, `heartbeatMs` after the write that began at `from` (a write for any reason renews it). */
  private armHeartbeat(from: number): void {
    this.heartbeatDue = false;
    if (this.heartbeatTimer !== undefined) this.clock.clearTimeout(this.heartbeatTimer);
    if (this.stopped) return;
    this.heartbeatTimer = this.clock.setTimeout(
      () => {
        this.heartbeatTimer = undefined;
        this.heartbeatDue = true;
        this.runner.request();
      },
      Math.max(0, (this.o.heartbeatMs ?? HEARTBEAT_SECONDS * 1000) - (this.clock.now() - from)),
    );
  }

  private signal(): AbortSignal {
    return AbortSignal.any([this.abort.signal, AbortSignal.timeout(this.o.requestTimeoutMs ?? 10_000)]);
  }

  private async write(status: FlowhintNodeStatus): Promise<void> {
    const { api, node } = this.o;
    if (!this.objectApplied) {
      this.uid ??= await api.nodeUid(node, this.signal()).catch((err: unknown) => {
        throw httpStatus(err) === 404 ? new NodeNotFound(errorMessage(err)) : err;
      });
      await api.applyObject(node, this.uid, this.signal());
      this.objectApplied = true;
    }
    try {
      await api.applyStatus(node, status, this.signal());
    } catch (err) {
      // The object went away (deleted by hand, with its Node, or with the CRD): create it
      // again next time, with the Node read again (a new Node of that name has a new uid).
      if (httpStatus(err) === 404) {
        this.objectApplied = false;
        this.uid = undefined;
      }
      throw err;
    }
  }

  private failed(err: unknown): void {
    const code = httpStatus(err);
    const { log, node } = this.o;
    const kind =
      err instanceof NodeNotFound
        ? 'node-missing'
        : code === 404
          ? 'crd-missing'
          : code === 409
            ? 'conflict'
            : 'failing';
    if (!this.conditions.changed('write', kind)) return;
    const detail = errorMessage(err).split('\n')[0]?.slice(0, 300);
    const what = {
      'node-missing': `Node ${node} not found: is --node-name (NODE_NAME) this node's name? retrying`,
      'crd-missing':
        'FlowhintNode not found: the CRD flowhintnodes.flowhint.dev is not installed yet (manifests/base/crd.yaml); retrying',
      conflict: 'FlowhintNode write conflict; retrying',
      failing: 'cannot write FlowhintNode status; programming continues, retrying',
    }[kind];
    log.warn({ flowhintNode: node, err: detail }, what);
  }
}

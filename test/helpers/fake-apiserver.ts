/**
 * A FAKE Kubernetes API server for tests: just enough of list/watch on /api/v1/services
 * to exercise the informer as the real one would. It is not a Kubernetes implementation.
 *
 * What it follows of the API's semantics:
 * - every change bumps a global resourceVersion; lists carry it in metadata.resourceVersion;
 * - `?watch=true&resourceVersion=RV` replays the changes after RV, then streams new ones as
 *   JSON lines `{type, object}`; an RV older than the retained history gets a 410 Gone
 *   ERROR event (`compact()`), as after etcd compaction;
 * - label selectors of the form `key` (exists) filter lists and watches; an object that
 *   stops matching is sent as DELETED to a selecting watch;
 * - BOOKMARK events when `allowWatchBookmarks=true` was asked for (or `bookmark()` forces);
 * - faults on demand: HTTP errors for the next N requests, dropped watch connections,
 *   watches that hang without sending anything, the server refusing connections (`pause`),
 *   and the server accepting but never answering (`unresponsive`);
 * - `limit` and `continue` on lists: pages of a consistent snapshot, in key order, each with
 *   the snapshot's resourceVersion, `continue` and `remainingItemCount` while more remain; a
 *   continue token whose snapshot is gone (`expireContinues()`, as after etcd compaction)
 *   gets 410 Gone (reason Expired);
 * - GET and PATCH of one Service with `application/json-patch+json` (a failing `test` op: 422);
 * - more resources through `route()` (test/helpers/fake-flowhintnodes.ts: Nodes and the
 *   FlowhintNode CRD), behind the same faults.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createTlsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import fjp from 'fast-json-patch';
import { matches, type Obj } from './fake-kube.ts';

interface Change {
  rv: number;
  type: 'ADDED' | 'MODIFIED' | 'DELETED';
  object: Obj;
  before: Obj | undefined;
}

interface Watcher {
  res: ServerResponse;
  selector: string | undefined;
  bookmarks: boolean;
  hang: boolean;
}

export interface RequestLog {
  method: string;
  path: string;
  query: Record<string, string>;
  /** The request's Accept header ('' when absent). */
  accept: string;
}

/** A handler for more paths: answers and returns true, or returns false. */
export type Route = (req: IncomingMessage, res: ServerResponse, url: URL) => boolean;

/** Answer a JSON body. */
export function reply(res: ServerResponse, code: number, body: unknown): void {
  res.writeHead(code, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
}

/** A Kubernetes `Status` failure, as the API server answers errors. */
export function statusFailure(code: number, reason: string, message: string): object {
  return { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', code, reason, message };
}

export class FakeApiServer {
  private server: Server;
  private rv = 100;
  private objects = new Map<string, Obj>();
  private history: Change[] = [];
  private oldestRv = 100;
  private watchers = new Set<Watcher>();
  private failures: number[] = [];
  private hangNext = 0;
  private silent = false;
  private held = new Set<ServerResponse>();
  /** Snapshots of paginated lists, by continue-token id. */
  private snapshots = new Map<number, { rv: number; items: Obj[] }>();
  private nextSnapshot = 1;
  readonly requests: RequestLog[] = [];
  private readonly routes: Route[] = [];
  url = '';

  private readonly host: string;
  private readonly scheme: 'http' | 'https';

  /** Plain HTTP on loopback by default; `tls` serves HTTPS, as a real API server, on `host`. */
  constructor(o: { tls?: { cert: string; key: string }; host?: string } = {}) {
    const handler = (req: IncomingMessage, res: ServerResponse) => this.handle(req, res);
    this.server = o.tls ? createTlsServer({ cert: o.tls.cert, key: o.tls.key }, handler) : createServer(handler);
    this.host = o.host ?? '127.0.0.1';
    this.scheme = o.tls ? 'https' : 'http';
  }

  private port = 0;

  async start(): Promise<void> {
    await new Promise<void>((r) => this.server.listen(this.port, this.host, r));
    this.port = (this.server.address() as AddressInfo).port;
    this.url = `${this.scheme}://${this.host}:${this.port}`;
  }

  get listenPort(): number {
    return this.port;
  }

  /** The API server goes away: connections refused, open watches reset. State is kept. */
  async pause(): Promise<void> {
    this.dropWatches();
    this.server.closeAllConnections();
    await new Promise<void>((r) => this.server.close(() => r()));
  }

  /**
   * The API server stops answering without closing anything, as an overloaded one does, or
   * one behind a cut that sends no reset: open watches go silent, new requests are accepted
   * and never answered. `respond()` ends it for new requests; what was taken meanwhile stays
   * unanswered until the client gives up, as on dead connections.
   */
  unresponsive(): void {
    this.silent = true;
    for (const w of this.watchers) w.hang = true;
  }

  respond(): void {
    this.silent = false;
  }

  /** Requests accepted and not answered (see unresponsive). */
  get heldRequests(): number {
    return this.held.size;
  }

  /** Back on the same address, with whatever changed meanwhile (via apply/delete). */
  async resume(): Promise<void> {
    await this.start();
  }

  async stop(): Promise<void> {
    for (const res of this.held) res.destroy();
    await this.pause();
  }

  /** Serve more paths (tried before the Service paths, after the faults). */
  route(r: Route): void {
    this.routes.push(r);
  }

  /** One Service as stored, or undefined. */
  get(namespace: string, name: string): Obj | undefined {
    return this.objects.get(`${namespace}/${name}`);
  }

  /** Create or replace an object (ADDED or MODIFIED). */
  apply(o: Obj): void {
    const key = `${o.metadata.namespace}/${o.metadata.name}`;
    const before = this.objects.get(key);
    const object = structuredClone(o);
    object.metadata.resourceVersion = String(++this.rv);
    this.objects.set(key, object);
    this.record({ rv: this.rv, type: before ? 'MODIFIED' : 'ADDED', object, before });
  }

  delete(namespace: string, name: string): void {
    const key = `${namespace}/${name}`;
    const before = this.objects.get(key);
    if (!before) return;
    this.objects.delete(key);
    const object = structuredClone(before);
    object.metadata.resourceVersion = String(++this.rv);
    this.record({ rv: this.rv, type: 'DELETED', object, before });
  }

  /** Forget history up to now: watches from an older resourceVersion get 410 Gone. */
  compact(): void {
    this.history = [];
    this.oldestRv = this.rv;
  }

  /** The next `n` requests (list or watch) answer HTTP `status`. */
  failNext(n: number, status = 500): void {
    for (let i = 0; i < n; i++) this.failures.push(status);
  }

  /** The next `n` watch requests are accepted and then never send a byte. */
  hangNextWatches(n: number): void {
    this.hangNext += n;
  }

  /** Cut every open watch connection, as a load balancer or API server restart would. */
  dropWatches(): void {
    for (const w of this.watchers) w.res.destroy();
    this.watchers.clear();
  }

  /** Close every open watch cleanly (end of the chunked stream), as the API server does on timeout. */
  endWatches(): void {
    for (const w of this.watchers) w.res.end();
    this.watchers.clear();
  }

  bookmark(): void {
    for (const w of this.watchers)
      if (!w.hang)
        this.send(w, {
          type: 'BOOKMARK',
          object: { kind: 'Service', apiVersion: 'v1', metadata: { resourceVersion: String(this.rv) } },
        });
  }

  get openWatches(): number {
    return this.watchers.size;
  }

  private record(c: Change): void {
    this.history.push(c);
    for (const w of this.watchers) this.deliver(w, c);
  }

  private deliver(w: Watcher, c: Change): void {
    if (w.hang) return;
    const now = c.type !== 'DELETED' && matches(c.object, w.selector);
    const was = matches(c.before, w.selector);
    if (now) this.send(w, { type: was ? 'MODIFIED' : 'ADDED', object: c.object });
    else if (was) this.send(w, { type: 'DELETED', object: c.object });
  }

  private send(w: Watcher, event: unknown): void {
    w.res.write(`${JSON.stringify(event)}\n`);
  }

  readonly patches: Array<{ key: string; contentType: string; ops: unknown }> = [];

  private patchOne(req: IncomingMessage, res: ServerResponse, namespace: string, name: string, dryRun: boolean): void {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      const key = `${namespace}/${name}`;
      const current = this.objects.get(key);
      if (!current) {
        reply(res, 404, statusFailure(404, 'NotFound', `services "${name}" not found`));
        return;
      }
      const ops = JSON.parse(body) as fjp.Operation[];
      this.patches.push({ key, contentType: req.headers['content-type'] ?? '', ops });
      if (req.headers['content-type'] !== 'application/json-patch+json') {
        reply(res, 415, statusFailure(415, 'UnsupportedMediaType', 'the fake patches Services with JSON Patch only'));
        return;
      }
      let next: Obj;
      try {
        next = fjp.applyPatch(structuredClone(current), ops, true, false).newDocument;
      } catch (err) {
        reply(res, 422, statusFailure(422, 'Invalid', String(err)));
        return;
      }
      if (!dryRun) this.apply(next);
      reply(res, 200, this.objects.get(key));
    });
  }

  /** Continue tokens stop working: their snapshots are gone. */
  expireContinues(): void {
    this.snapshots.clear();
  }

  /** A list, or a page of one (`limit`, `continue`). */
  private list(res: ServerResponse, selector: string | undefined, query: Record<string, string>): void {
    const kind = { kind: 'ServiceList', apiVersion: 'v1' };
    let snap: { id: number; rv: number; items: Obj[] };
    let offset = 0;
    if (query.continue) {
      const token = JSON.parse(Buffer.from(query.continue, 'base64url').toString()) as { id: number; offset: number };
      const found = this.snapshots.get(token.id);
      if (!found) {
        reply(
          res,
          410,
          statusFailure(
            410,
            'Expired',
            'The provided continue parameter is too old to display a consistent list result.',
          ),
        );
        return;
      }
      snap = { id: token.id, ...found };
      offset = token.offset;
    } else {
      const items = [...this.objects.values()]
        .filter((o) => matches(o, selector))
        .sort((a, b) => key(a).localeCompare(key(b)));
      snap = { id: this.nextSnapshot++, rv: this.rv, items };
    }
    const limit = Number(query.limit ?? 0);
    if (!(limit > 0)) {
      reply(res, 200, { ...kind, metadata: { resourceVersion: String(snap.rv) }, items: snap.items });
      return;
    }
    const items = snap.items.slice(offset, offset + limit);
    const rest = snap.items.length - offset - items.length;
    const metadata: Record<string, unknown> = { resourceVersion: String(snap.rv) };
    if (rest > 0) {
      this.snapshots.set(snap.id, { rv: snap.rv, items: snap.items });
      metadata.continue = Buffer.from(JSON.stringify({ id: snap.id, offset: offset + items.length })).toString(
        'base64url',
      );
      metadata.remainingItemCount = rest;
    } else this.snapshots.delete(snap.id);
    reply(res, 200, { ...kind, metadata, items });
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    const u = new URL(req.url ?? '/', 'http://x');
    const query = Object.fromEntries(u.searchParams);
    this.requests.push({ method: req.method ?? '', path: u.pathname, query, accept: req.headers.accept ?? '' });
    if (this.silent) {
      this.held.add(res);
      res.on('close', () => this.held.delete(res));
      return;
    }
    const status = this.failures.shift();
    if (status !== undefined) {
      reply(res, status, statusFailure(status, 'Injected', 'injected failure'));
      return;
    }
    for (const r of this.routes) if (r(req, res, u)) return;
    const one = /^\/api\/v1\/namespaces\/([^/]+)\/services\/([^/]+)$/.exec(u.pathname);
    if (one && req.method === 'GET') {
      const found = this.get(decodeURIComponent(one[1]!), decodeURIComponent(one[2]!));
      if (found) reply(res, 200, found);
      else reply(res, 404, statusFailure(404, 'NotFound', `services "${one[2]}" not found`));
      return;
    }
    if (one && req.method === 'PATCH') {
      this.patchOne(req, res, decodeURIComponent(one[1]!), decodeURIComponent(one[2]!), query.dryRun === 'All');
      return;
    }
    if (u.pathname !== '/api/v1/services' || req.method !== 'GET') {
      res.writeHead(404).end();
      return;
    }
    const selector = query.labelSelector;
    if (query.watch === 'true') {
      res.writeHead(200, { 'content-type': 'application/json', 'transfer-encoding': 'chunked' });
      const w: Watcher = { res, selector, bookmarks: query.allowWatchBookmarks === 'true', hang: this.hangNext > 0 };
      if (this.hangNext > 0) this.hangNext -= 1;
      res.flushHeaders();
      this.watchers.add(w);
      res.on('close', () => this.watchers.delete(w));
      const from = Number(query.resourceVersion ?? '0');
      if (w.hang) return;
      if (query.resourceVersion && from < this.oldestRv) {
        this.send(w, {
          type: 'ERROR',
          object: {
            kind: 'Status',
            apiVersion: 'v1',
            status: 'Failure',
            code: 410,
            reason: 'Expired',
            message: `too old resource version: ${from} (${this.oldestRv})`,
          },
        });
        res.end();
        this.watchers.delete(w);
        return;
      }
      for (const c of this.history) if (c.rv > from) this.deliver(w, c);
      return;
    }
    this.list(res, selector, query);
  }
}

const key = (o: Obj) => `${o.metadata.namespace}/${o.metadata.name}`;

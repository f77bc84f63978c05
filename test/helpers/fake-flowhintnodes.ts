/**
 * A FAKE of the API server's Nodes and of the FlowhintNode CRD, plugged into the fake API
 * server (fake-apiserver.ts, whose faults apply to these paths too). Not Kubernetes.
 *
 * What it follows of the API:
 * - `GET /api/v1/nodes/NAME`, and `GET /api/v1/nodes` with an equality `labelSelector` (Nodes
 *   are labelled `kubernetes.io/os` as the kubelet labels them; `refuseNodeList` answers the
 *   list with that status, as RBAC's 403 does; a client that asks first for
 *   `as=PartialObjectMetadataList` gets the Nodes' metadata only, any other whole Nodes with a
 *   status); nodes have a uid; deleting one deletes the FlowhintNodes whose
 *   owner reference names that uid, as the garbage collector does (at once, not later);
 * - the CRD's paths under `/apis/flowhint.dev/v1alpha1/flowhintnodes`: list, get, and PATCH
 *   with `application/apply-patch+yaml` (server-side apply) on the object and on its `status`
 *   subresource; 404 for all of them while the CRD is not installed (`crdInstalled`);
 * - apply needs `fieldManager` (400 without); an apply of the object creates it and sets only
 *   metadata (status is a subresource, so its status is ignored); an apply of the status of a
 *   missing object is 404; a status the CRD's schema (manifests/base/crd.yaml) refuses is 422,
 *   validated with ajv;
 * - field ownership by manager: a field set by one manager and applied with a different value
 *   by another is a 409 conflict unless `force=true`, which moves it; fields a manager applied
 *   before and no longer applies are removed; `managedFields` lists each manager.
 *
 * What it simplifies: ownership is per field of `status` and per `metadata` field
 * (ownerReferences, labels, annotations), not per leaf as the API's fieldsV1 sets are; lists
 * are atomic (no merge keys); `managedFields` entries carry manager, operation and
 * subresource but no fieldsV1 or time; no resourceVersion preconditions, no dry run, no
 * defaulting from the schema.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { readFileSync } from 'node:fs';
import { randomUUID } from 'node:crypto';
import { Ajv, type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';
import { load } from 'js-yaml';
import { reply, statusFailure, type FakeApiServer } from './fake-apiserver.ts';
import { matches } from './fake-kube.ts';

type Json = Record<string, unknown>;

interface Stored {
  metadata: Json & { name: string; uid: string; resourceVersion: string };
  status?: Json;
  /** `manager|subresource` -> fields it owns (`status.support`, `metadata.ownerReferences`, …). */
  owners: Map<string, Set<string>>;
}

export interface ApplyLog {
  name: string;
  subresource: 'status' | undefined;
  manager: string;
  force: boolean;
  code: number;
}

const BASE = '/apis/flowhint.dev/v1alpha1/flowhintnodes';
/** What a whole Node carries beside its metadata, most of it the images list (a stand-in, sized like a real one's). */
const NODE_STATUS = {
  images: Array.from({ length: 40 }, (_, i) => ({
    names: [`registry.example/image-${i}@sha256:${'0'.repeat(64)}`, `registry.example/image-${i}:v1`],
    sizeBytes: 1e8,
  })),
};
const CRD = new URL('../../manifests/base/crd.yaml', import.meta.url);

/** The CRD's openAPIV3Schema for `status`, compiled (as the API server validates writes). */
function statusValidator(): ValidateFunction {
  const crd = load(readFileSync(CRD, 'utf8')) as {
    spec: { versions: Array<{ schema: { openAPIV3Schema: { properties: { status: object } } } }> };
  };
  const ajv = new Ajv({ strict: false, allErrors: true });
  addFormats.default(ajv);
  return ajv.compile(crd.spec.versions[0]!.schema.openAPIV3Schema.properties.status);
}

/** The fields of an applied object a manager owns, with their values (see the header). */
function fieldsOf(body: Json, subresource: 'status' | undefined): Map<string, unknown> {
  const out = new Map<string, unknown>();
  if (subresource === 'status') {
    for (const [k, v] of Object.entries((body.status ?? {}) as Json)) out.set(`status.${k}`, v);
    return out;
  }
  const meta = (body.metadata ?? {}) as Json;
  for (const k of ['ownerReferences', 'labels', 'annotations']) if (k in meta) out.set(`metadata.${k}`, meta[k]);
  return out;
}

function getPath(o: Stored, path: string): unknown {
  const [top, key] = path.split('.') as ['status' | 'metadata', string];
  return (top === 'status' ? o.status : o.metadata)?.[key];
}

function setPath(o: Stored, path: string, value: unknown): void {
  const [top, key] = path.split('.') as ['status' | 'metadata', string];
  if (top === 'status') {
    o.status ??= {};
    if (value === undefined) delete o.status[key];
    else o.status[key] = structuredClone(value);
  } else if (value === undefined) delete o.metadata[key];
  else o.metadata[key] = structuredClone(value);
}

export class FakeFlowhintNodes {
  crdInstalled = true;
  /** Answer every request for these paths with this HTTP status (the rest of the fake answers). */
  refuse: number | undefined;
  /** Accept every request for these paths and never answer (the rest of the fake answers). */
  hang = false;
  /** Requests taken while `hang` was set. */
  readonly held = new Set<ServerResponse>();
  /** Answer the Node list with this HTTP status (403: the caller may not list Nodes). */
  refuseNodeList: number | undefined;
  readonly nodes = new Map<string, { metadata: { name: string; uid: string; labels: Record<string, string> } }>();
  readonly objects = new Map<string, Stored>();
  readonly applies: ApplyLog[] = [];
  private rv = 1;
  private readonly validate = statusValidator();

  constructor(api: FakeApiServer) {
    api.route((req, res, url) => this.handle(req, res, url));
  }

  addNode(name: string, os = 'linux'): string {
    const uid = randomUUID();
    this.nodes.set(name, { metadata: { name, uid, labels: { 'kubernetes.io/os': os } } });
    return uid;
  }

  /** Delete a Node; its dependents go with it (the garbage collector, at once). */
  deleteNode(name: string): void {
    const uid = this.nodes.get(name)?.metadata.uid;
    this.nodes.delete(name);
    for (const [n, o] of this.objects) {
      const refs = (o.metadata.ownerReferences ?? []) as Array<{ uid?: string }>;
      if (refs.some((r) => r.uid === uid)) this.objects.delete(n);
    }
  }

  /** A FlowhintNode as a client reads it, with managedFields. */
  read(name: string): Json | undefined {
    const o = this.objects.get(name);
    if (!o) return undefined;
    const managedFields = [...o.owners.keys()].sort().map((owner) => {
      const [manager, subresource] = owner.split('|');
      return {
        manager,
        operation: 'Apply',
        apiVersion: 'flowhint.dev/v1alpha1',
        ...(subresource ? { subresource } : {}),
      };
    });
    return {
      apiVersion: 'flowhint.dev/v1alpha1',
      kind: 'FlowhintNode',
      metadata: { ...structuredClone(o.metadata), managedFields },
      ...(o.status ? { status: structuredClone(o.status) } : {}),
    };
  }

  /** Put a FlowhintNode as another writer would (tests of explain; conflicts). */
  put(name: string, body: Json, manager = 'test', subresource?: 'status'): number {
    return this.apply(name, body, manager, true, subresource);
  }

  /** Store a status as is, unvalidated: what another version's schema let through. */
  putRaw(name: string, status: Json): void {
    this.put(name, { metadata: { name } });
    const o = this.objects.get(name);
    if (o) o.status = structuredClone(status);
  }

  /** Server-side apply, as described in the header; returns the HTTP status. */
  apply(name: string, body: Json, manager: string, force: boolean, subresource: 'status' | undefined): number {
    let o = this.objects.get(name);
    if (!o) {
      if (subresource === 'status') return 404;
      o = {
        metadata: { name, uid: randomUUID(), resourceVersion: '0', creationTimestamp: new Date().toISOString() },
        owners: new Map(),
      };
    }
    if (subresource === 'status' && !this.validate(body.status ?? {})) return 422;
    const fields = fieldsOf(body, subresource);
    // The API tracks a manager's fields per subresource: these are separate owners.
    const owner = `${manager}|${subresource ?? ''}`;
    if (!force) {
      for (const [path, value] of fields)
        for (const [other, owned] of o.owners)
          if (other !== owner && owned.has(path) && JSON.stringify(getPath(o, path)) !== JSON.stringify(value))
            return 409;
    }
    const before = o.owners.get(owner) ?? new Set<string>();
    for (const path of before)
      if (!fields.has(path) && ![...o.owners].some(([m, s]) => m !== owner && s.has(path))) setPath(o, path, undefined);
    for (const [path, value] of fields) {
      setPath(o, path, value);
      for (const [m, s] of o.owners) if (m !== owner) s.delete(path);
    }
    o.owners.set(owner, new Set(fields.keys()));
    o.metadata.resourceVersion = String(++this.rv);
    this.objects.set(name, o);
    return 200;
  }

  /** Close the connections `hang` held (the server going away). */
  release(): void {
    for (const res of this.held) res.destroy();
  }

  private handle(req: IncomingMessage, res: ServerResponse, url: URL): boolean {
    const node = /^\/api\/v1\/nodes\/([^/]+)$/.exec(url.pathname);
    if (node && req.method === 'GET') {
      const n = this.nodes.get(decodeURIComponent(node[1]!));
      if (n) reply(res, 200, { apiVersion: 'v1', kind: 'Node', ...n });
      else reply(res, 404, statusFailure(404, 'NotFound', `nodes "${node[1]}" not found`));
      return true;
    }
    if (url.pathname === '/api/v1/nodes' && req.method === 'GET') {
      if (this.refuseNodeList !== undefined) {
        const why = 'nodes is forbidden: User "u" cannot list resource "nodes" in API group "" at the cluster scope';
        reply(res, this.refuseNodeList, statusFailure(this.refuseNodeList, 'Forbidden', why));
        return true;
      }
      const selector = url.searchParams.get('labelSelector') ?? undefined;
      const found = [...this.nodes.values()].filter((n) =>
        matches({ metadata: { ...n.metadata, namespace: '' } }, selector),
      );
      const metadata = { resourceVersion: String(this.rv) };
      // As the API server does: metadata only when the client accepts it first (its first
      // choice, as client-go's metadata client asks), else whole Nodes with their status.
      if ((req.headers.accept ?? '').split(',')[0]?.includes('as=PartialObjectMetadataList')) {
        const kind = { apiVersion: 'meta.k8s.io/v1', kind: 'PartialObjectMetadata' };
        const items = found.map((n) => ({ ...kind, metadata: structuredClone(n.metadata) }));
        reply(res, 200, { apiVersion: 'meta.k8s.io/v1', kind: 'PartialObjectMetadataList', metadata, items });
        return true;
      }
      const items = found.map((n) => ({ apiVersion: 'v1', kind: 'Node', ...structuredClone(n), status: NODE_STATUS }));
      reply(res, 200, { apiVersion: 'v1', kind: 'NodeList', metadata, items });
      return true;
    }
    if (!url.pathname.startsWith(BASE)) return false;
    if (this.hang) {
      this.held.add(res);
      res.on('close', () => this.held.delete(res));
      return true;
    }
    if (this.refuse !== undefined) {
      reply(res, this.refuse, statusFailure(this.refuse, 'InternalError', 'injected failure'));
      return true;
    }
    if (!this.crdInstalled) {
      reply(res, 404, statusFailure(404, 'NotFound', 'the server could not find the requested resource'));
      return true;
    }
    const m = /^\/apis\/flowhint\.dev\/v1alpha1\/flowhintnodes(?:\/([^/]+)(\/status)?)?$/.exec(url.pathname);
    if (!m) return false;
    const name = m[1] === undefined ? undefined : decodeURIComponent(m[1]);
    const subresource = m[2] ? ('status' as const) : undefined;
    if (req.method === 'GET' && name === undefined) {
      const items = [...this.objects.keys()].sort().map((n) => this.read(n));
      reply(res, 200, { apiVersion: 'flowhint.dev/v1alpha1', kind: 'FlowhintNodeList', metadata: {}, items });
      return true;
    }
    if (req.method === 'GET' && name !== undefined) {
      const o = this.read(name);
      if (o) reply(res, 200, o);
      else reply(res, 404, statusFailure(404, 'NotFound', `flowhintnodes.flowhint.dev "${name}" not found`));
      return true;
    }
    if (req.method !== 'PATCH' || name === undefined) return false;
    let text = '';
    req.on('data', (c: Buffer) => (text += c.toString()));
    req.on('end', () => this.patch(res, url, name, subresource, req.headers['content-type'] ?? '', text));
    return true;
  }

  private patch(
    res: ServerResponse,
    url: URL,
    name: string,
    subresource: 'status' | undefined,
    contentType: string,
    text: string,
  ): void {
    const manager = url.searchParams.get('fieldManager') ?? '';
    const force = url.searchParams.get('force') === 'true';
    const log = (code: number) => this.applies.push({ name, subresource, manager, force, code });
    if (contentType !== 'application/apply-patch+yaml') {
      log(415);
      reply(res, 415, statusFailure(415, 'UnsupportedMediaType', `the fake serves apply only, not ${contentType}`));
      return;
    }
    if (!manager) {
      log(400);
      reply(
        res,
        400,
        statusFailure(400, 'BadRequest', 'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required'),
      );
      return;
    }
    const body = load(text) as Json;
    const code = this.apply(name, body, manager, force, subresource);
    log(code);
    const messages: Record<number, [string, string]> = {
      404: ['NotFound', `flowhintnodes.flowhint.dev "${name}" not found`],
      409: ['Conflict', `Apply failed with conflicts: another manager owns fields of "${name}"`],
      422: ['Invalid', `FlowhintNode.flowhint.dev "${name}" is invalid: ${JSON.stringify(this.validate.errors)}`],
    };
    const failure = messages[code];
    if (failure) reply(res, code, statusFailure(code, ...failure));
    else reply(res, 200, this.read(name));
  }
}

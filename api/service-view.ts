/**
 * The part of a Service object that flowhint reads (pure): what a cache of Services needs to
 * keep. The agent's informer holds every hinted Service of the cluster for as long as it
 * runs, and an object as the API server sends it is mostly fields flowhint never reads
 * (managedFields, kubectl's last-applied-configuration annotation, selectors, session
 * affinity, status conditions): on a 10,000-Service cluster they are most of the agent's
 * memory. `serviceView` copies only the fields `Service` (service.ts) names, and of the
 * annotations and labels only flowhint's own (`flowhint.dev/...`), which is all the reader
 * and validation look at.
 *
 * Values are copied as they are, never checked or converted, so a malformed field is
 * refused by `readHint` with the same reason as in the whole object; what is not an object
 * where an object is expected is kept whole for the same reason. The one difference: a
 * non-string value under someone else's annotation key, which the API server cannot store
 * (annotations are `map[string]string`), no longer makes the object unreadable.
 */
import { DOMAIN } from './keys.ts';

type Plain = Record<string, unknown>;

const isPlain = (v: unknown): v is Plain => typeof v === 'object' && v !== null && !Array.isArray(v);

const METADATA = ['name', 'generateName', 'namespace', 'uid', 'resourceVersion'] as const;
const SPEC = ['type', 'clusterIP', 'clusterIPs', 'externalIPs'] as const;
const PORT = ['name', 'protocol', 'port', 'nodePort'] as const;
const INGRESS = ['ip', 'hostname'] as const;

/** The listed own fields of `from` that are present (null included), copied by reference. */
function pick(from: Plain, keys: readonly string[]): Plain {
  const out: Plain = {};
  for (const k of keys) if (Object.hasOwn(from, k)) out[k] = from[k];
  return out;
}

/** `value` with `shape` applied when it is a plain object, else `value` itself. */
function ifPlain(value: unknown, shape: (v: Plain) => Plain): unknown {
  return isPlain(value) ? shape(value) : value;
}

/** Each element of a list shaped, when it is a list. */
function eachOf(value: unknown, shape: (v: Plain) => Plain): unknown {
  return Array.isArray(value) ? value.map((x) => ifPlain(x, shape)) : value;
}

/** Of a string map, only flowhint's keys. */
function ownKeys(map: unknown): unknown {
  if (!isPlain(map)) return map;
  const out: Plain = {};
  for (const [k, v] of Object.entries(map)) if (k.startsWith(`${DOMAIN}/`)) out[k] = v;
  return out;
}

function withOptional(out: Plain, from: Plain, key: string, shape: (v: unknown) => unknown): void {
  if (Object.hasOwn(from, key)) out[key] = shape(from[key]);
}

function metadataView(m: Plain): Plain {
  const out = pick(m, METADATA);
  withOptional(out, m, 'annotations', ownKeys);
  withOptional(out, m, 'labels', ownKeys);
  return out;
}

function specView(s: Plain): Plain {
  const out = pick(s, SPEC);
  withOptional(out, s, 'ports', (p) => eachOf(p, (x) => pick(x, PORT)));
  return out;
}

function statusView(s: Plain): Plain {
  const out: Plain = {};
  withOptional(out, s, 'loadBalancer', (lb) =>
    ifPlain(lb, (l) => {
      const o: Plain = {};
      withOptional(o, l, 'ingress', (i) => eachOf(i, (x) => pick(x, INGRESS)));
      return o;
    }),
  );
  return out;
}

/** A copy of the fields of `object` that flowhint reads; `object` itself if it is not an object. */
export function serviceView(object: unknown): unknown {
  if (!isPlain(object)) return object;
  const out = pick(object, ['apiVersion', 'kind']);
  withOptional(out, object, 'metadata', (m) => ifPlain(m, metadataView));
  withOptional(out, object, 'spec', (s) => ifPlain(s, specView));
  withOptional(out, object, 'status', (s) => ifPlain(s, statusView));
  return out;
}

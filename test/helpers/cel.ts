/** CEL over Kubernetes objects in tests (@bufbuild/cel): JSON as the API server's CEL sees it. */
type Obj = Record<string, unknown>;

/** JSON as CEL sees Kubernetes objects: maps, lists, ints. */
export function toCel(v: unknown): unknown {
  if (v === null || v === undefined) return null;
  if (Array.isArray(v)) return v.map(toCel);
  if (typeof v === 'object') return new Map(Object.entries(v as Obj).map(([k, x]) => [k, toCel(x)]));
  if (typeof v === 'number' && Number.isInteger(v)) return BigInt(v);
  return v;
}

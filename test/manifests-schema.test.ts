/**
 * Every object the manifests build, validated against the Kubernetes OpenAPI schemas
 * (kubernetes-models, plus the cert-manager and Prometheus Operator CRD models).
 */
import t from 'tap';
import { execFileSync } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadAll } from 'js-yaml';
import { kustomizeBuild } from './helpers/kustomize.ts';

type Obj = Record<string, any>;
const ROOT = new URL('../manifests/', import.meta.url).pathname;
const parse = (text: string) => (loadAll(text) as Obj[]).filter(Boolean);
const build = (dir: string) => parse(kustomizeBuild(dir));

function modelPath(o: Obj): string {
  const [group, version] = String(o.apiVersion).includes('/')
    ? String(o.apiVersion).split('/')
    : ['', String(o.apiVersion)];
  if (group === 'cert-manager.io') return `@kubernetes-models/cert-manager/${group}/${version}/${o.kind}`;
  if (group === 'monitoring.coreos.com') return `@kubernetes-models/prometheus-operator/${group}/${version}/${o.kind}`;
  return `kubernetes-models/${group ? `${group}/` : ''}${version}/${o.kind}`;
}

/**
 * kustomize wraps long base64 values (Secret data, the caBundle it copies) across lines. The
 * API server decodes them with Go's base64, which ignores newlines; the schema's "byte"
 * format does not, so unwrap them as the API server reads them.
 */
function asServerReads(o: Obj): Obj {
  const c = structuredClone(o);
  const unwrap = (v: unknown) => (typeof v === 'string' ? v.replace(/\s+/g, '') : v);
  if (c.kind === 'Secret' && c.data) for (const k of Object.keys(c.data)) c.data[k] = unwrap(c.data[k]);
  for (const w of c.webhooks ?? [])
    if (w.clientConfig?.caBundle) w.clientConfig.caBundle = unwrap(w.clientConfig.caBundle);
  return c;
}

async function validate(raw: Obj): Promise<string | undefined> {
  const o = asServerReads(raw);
  const mod = (await import(modelPath(o))) as Record<string, new (x: Obj) => { validate(): void }>;
  const Model = mod[o.kind];
  if (!Model) return `no model for ${o.apiVersion} ${o.kind}`;
  try {
    new Model(o).validate();
    return undefined;
  } catch (err) {
    return (err as Error).message.slice(0, 300);
  }
}

t.test('every built object is valid against its schema', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'flowhint-schema-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  cpSync(ROOT, dir, { recursive: true });
  execFileSync(
    process.execPath,
    [
      'bin/flowhint.ts',
      'certs',
      '--out',
      join(dir, 'overlays', 'self-managed', 'certs'),
      '--service',
      'flowhint-webhook',
      '--namespace',
      'flowhint-system',
    ],
    { stdio: 'ignore' },
  );
  const sets: Array<[string, Obj[]]> = [
    ['base', build(join(dir, 'base'))],
    ['overlays/cert-manager', build(join(dir, 'overlays', 'cert-manager'))],
    ['overlays/self-managed', build(join(dir, 'overlays', 'self-managed'))],
    ['backfill', build(join(dir, 'backfill'))],
    [
      'components/servicemonitor',
      ['monitors.yaml', 'rules.yaml'].flatMap((f) =>
        parse(readFileSync(join(dir, 'components', 'servicemonitor', f), 'utf8')),
      ),
    ],
    [
      'examples',
      (await import('node:fs'))
        .readdirSync(join(dir, 'examples'))
        .flatMap((f) => parse(readFileSync(join(dir, 'examples', f), 'utf8'))),
    ],
  ];
  for (const [name, objs] of sets) {
    t.ok(objs.length > 0, `${name}: objects built`);
    for (const o of objs) t.equal(await validate(o), undefined, `${name}: ${o.kind} ${o.metadata?.name}`);
  }
});

t.test('the schema check can fail', async (t) => {
  const bad = {
    apiVersion: 'apps/v1',
    kind: 'DaemonSet',
    metadata: { name: 'x' },
    spec: { selector: {}, template: { spec: { containers: [{ name: 'c', ports: [{ containerPort: 'http' }] }] } } },
  };
  t.match(await validate(bad), /containerPort/);
});

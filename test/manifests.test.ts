/** The deployment manifests: they parse, kustomize builds every overlay, and they say what the docs say. */
import t from 'tap';
import { execFileSync } from 'node:child_process';
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadAll } from 'js-yaml';
import { kustomizeBuild } from './helpers/kustomize.ts';

type Obj = Record<string, any>;
const ROOT = new URL('../manifests/', import.meta.url).pathname;

function yamlFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((f) => {
    const p = join(dir, f);
    return statSync(p).isDirectory() ? yamlFiles(p) : /\.ya?ml$/.test(f) ? [p] : [];
  });
}

function build(dir: string): Obj[] {
  const out = kustomizeBuild(dir);
  return (loadAll(out) as Obj[]).filter(Boolean);
}

const find = (objs: Obj[], kind: string, name: string) => objs.find((o) => o.kind === kind && o.metadata.name === name);

t.test('every manifest parses', async (t) => {
  for (const f of yamlFiles(ROOT)) t.doesNotThrow(() => loadAll(readFileSync(f, 'utf8')), f.slice(ROOT.length));
});

const base = build(join(ROOT, 'base'));

t.test('kustomize builds the base and each overlay', async (t) => {
  t.ok(base.length >= 13, `base: ${base.length} objects`);
  const cm = build(join(ROOT, 'overlays', 'cert-manager'));
  // A CA chain: the caBundle is a CA certificate, which the serving certificate's renewals
  // leave alone. Followed from the webhook configurations' annotation, not by name.
  const serving = cm.find(
    (o) => o.kind === 'Certificate' && o.spec.dnsNames?.includes('flowhint-webhook.flowhint-system.svc'),
  );
  t.ok(serving, 'a serving certificate for the webhook Service');
  const issuerOf = (cert: Obj | undefined) => cert && find(cm, cert.spec.issuerRef.kind, cert.spec.issuerRef.name);
  const caIssuer = issuerOf(serving);
  t.ok(caIssuer?.spec.ca?.secretName, 'the serving certificate is issued by a CA Issuer');
  const caCert = cm.find((o) => o.kind === 'Certificate' && o.spec.secretName === caIssuer?.spec.ca?.secretName);
  t.equal(caCert?.spec.isCA, true, "the CA Issuer's secret is a CA certificate's");
  t.ok(issuerOf(caCert)?.spec.selfSigned, 'which is self-signed (the root)');
  t.equal(caCert?.spec.privateKey?.rotationPolicy, 'Never', "the CA's key survives its own renewals");
  for (const kind of ['MutatingWebhookConfiguration', 'ValidatingWebhookConfiguration']) {
    t.equal(
      find(cm, kind, 'flowhint')?.metadata.annotations?.['cert-manager.io/inject-ca-from'],
      `flowhint-system/${caCert?.metadata.name}`,
      `${kind}: caBundle from the CA certificate, not from the serving one`,
    );
  }
  // self-managed needs `flowhint certs` output first: do that in a copy.
  const dir = mkdtempSync(join(tmpdir(), 'flowhint-manifests-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  cpSync(ROOT, dir, { recursive: true });
  const certs = join(dir, 'overlays', 'self-managed', 'certs');
  const caBundle = execFileSync(
    process.execPath,
    ['bin/flowhint.ts', 'certs', '--out', certs, '--service', 'flowhint-webhook', '--namespace', 'flowhint-system'],
    { encoding: 'utf8' },
  ).trim();
  const sm = build(join(dir, 'overlays', 'self-managed'));
  t.equal(find(sm, 'Secret', 'flowhint-webhook-tls')?.type, 'kubernetes.io/tls');
  for (const kind of ['MutatingWebhookConfiguration', 'ValidatingWebhookConfiguration']) {
    t.equal(
      String(find(sm, kind, 'flowhint')?.webhooks[0].clientConfig.caBundle).replace(/\s/g, ''),
      caBundle,
      `${kind} caBundle is the CA that \`flowhint certs\` printed`,
    );
  }
});

t.test('the base installs the FlowhintNode CRD, cluster-scoped: kustomize gives it no namespace', async (t) => {
  const crd = find(base, 'CustomResourceDefinition', 'flowhintnodes.flowhint.dev');
  t.ok(crd);
  t.equal(crd?.metadata.namespace, undefined);
  t.equal(crd?.spec.scope, 'Cluster');
});

t.test('RBAC is least privilege', async (t) => {
  const roles = base.filter((o) => o.kind === 'ClusterRole' || o.kind === 'Role');
  // What the agent does with each (test/manifests-rbac.test.ts checks it against its requests).
  t.same(find(base, 'ClusterRole', 'flowhint-agent')?.rules, [
    { apiGroups: [''], resources: ['services'], verbs: ['list', 'watch'] },
    { apiGroups: [''], resources: ['nodes'], verbs: ['get'] },
    { apiGroups: ['flowhint.dev'], resources: ['flowhintnodes'], verbs: ['create', 'patch'] },
    { apiGroups: ['flowhint.dev'], resources: ['flowhintnodes/status'], verbs: ['patch'] },
  ]);
  // Read-only FlowhintNodes for the built-in view role, so Service owners can run explain.
  t.same(find(base, 'ClusterRole', 'flowhint-view'), {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'ClusterRole',
    metadata: {
      name: 'flowhint-view',
      labels: { 'rbac.authorization.k8s.io/aggregate-to-view': 'true', 'app.kubernetes.io/part-of': 'flowhint' },
    },
    rules: [{ apiGroups: ['flowhint.dev'], resources: ['flowhintnodes'], verbs: ['get', 'list', 'watch'] }],
  });
  // What explain reads besides Services (test/manifests-rbac.test.ts holds it to its requests).
  t.same(
    find(base, 'ClusterRole', 'flowhint-viewer')?.metadata.labels,
    { 'app.kubernetes.io/part-of': 'flowhint' },
    'flowhint-viewer: not aggregated',
  );
  t.equal(roles.length, 3, 'no other roles');
  const bound = base
    .filter((o) => o.kind === 'ClusterRoleBinding' || o.kind === 'RoleBinding')
    .flatMap((b) => b.subjects.map((s: Obj) => s.name));
  t.notOk(bound.includes('flowhint-webhook'), 'the webhook is bound to nothing');
  t.equal(find(base, 'ServiceAccount', 'flowhint-webhook')?.automountServiceAccountToken, false);
});

t.test('backfill: list and patch Services, nothing else', async (t) => {
  const b = build(join(ROOT, 'backfill'));
  t.same(find(b, 'ClusterRole', 'flowhint-backfill')?.rules, [
    { apiGroups: [''], resources: ['services'], verbs: ['list', 'patch'] },
  ]);
  t.same(find(b, 'Job', 'flowhint-backfill')?.spec.template.spec.containers[0].args, ['backfill']);
});

t.test('the webhook runs restricted; the agent has NET_ADMIN only', async (t) => {
  const w = find(base, 'Deployment', 'flowhint-webhook')!.spec;
  t.equal(w.replicas, 2);
  t.equal(w.template.spec.automountServiceAccountToken, false);
  t.equal(w.template.spec.securityContext.runAsNonRoot, true);
  t.equal(w.template.spec.securityContext.seccompProfile.type, 'RuntimeDefault');
  const c = w.template.spec.containers[0].securityContext;
  t.same(c, { allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'] } });
  t.ok(find(base, 'PodDisruptionBudget', 'flowhint-webhook'));
  t.ok(w.template.spec.affinity.podAntiAffinity);
  const a = find(base, 'DaemonSet', 'flowhint-agent')!.spec.template.spec;
  t.equal(a.hostNetwork, true);
  t.equal(a.priorityClassName, 'system-node-critical');
  t.same(a.tolerations, [{ operator: 'Exists' }]);
  const ac = a.containers[0].securityContext;
  t.equal(ac.privileged, false);
  t.same(ac.capabilities, { drop: ['ALL'], add: ['NET_ADMIN'] });
  t.same(ac.seccompProfile, { type: 'RuntimeDefault' }, 'the agent runs under the runtime default seccomp profile');
});

t.test('webhook configurations: v1, no side effects, ≤ 5 s, only flowhint-keyed Services', async (t) => {
  for (const [kind, policy] of [
    ['MutatingWebhookConfiguration', 'Fail'],
    ['ValidatingWebhookConfiguration', 'Ignore'],
  ] as const) {
    const hook = find(base, kind, 'flowhint')!.webhooks[0];
    t.same(hook.admissionReviewVersions, ['v1']);
    t.equal(hook.sideEffects, 'None');
    t.ok(hook.timeoutSeconds <= 5);
    t.equal(hook.failurePolicy, policy, `${kind} failurePolicy as documented`);
    t.same(hook.rules[0].operations, ['CREATE', 'UPDATE']);
    t.same(hook.namespaceSelector.matchExpressions[0].values, ['kube-system', 'flowhint-system']);
    t.match(hook.matchConditions[0].expression, /flowhint\.dev\/traffic-hint/);
    t.match(hook.matchConditions[0].expression, /oldObject/);
  }
  t.ok(find(base, 'ValidatingAdmissionPolicy', 'flowhint.dev'));
  t.same(find(base, 'ValidatingAdmissionPolicyBinding', 'flowhint.dev')?.spec.validationActions, ['Deny']);
});

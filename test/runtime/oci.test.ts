/**
 * The Pod-spec-to-OCI translation (test/runtime/oci.ts), on the rendered manifests and on
 * small specs: each field as the kubelet and containerd apply it, written out here by hand;
 * any field it does not translate fails by name.
 */
import t from 'tap';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadAll } from 'js-yaml';
import { kustomizeBuild } from '../helpers/kustomize.ts';
import { bytes, cpuShares, expand, seccompFor, translatePod, type PodContext } from '../runtime/oci.ts';

const dir = mkdtempSync(join(tmpdir(), 'flowhint-oci-'));
/** A small profile in containers-common's format. */
const file = join(dir, 'seccomp.json');
writeFileSync(
  file,
  JSON.stringify({
    defaultAction: 'SCMP_ACT_ERRNO',
    defaultErrnoRet: 38,
    archMap: [{ architecture: 'SCMP_ARCH_X86_64', subArchitectures: ['SCMP_ARCH_X86'] }],
    syscalls: [
      { names: ['read'], action: 'SCMP_ACT_ALLOW' },
      { names: ['arch_prctl'], action: 'SCMP_ACT_ALLOW', includes: { arches: ['amd64'] } },
      { names: ['s390_pci_mmio_read'], action: 'SCMP_ACT_ALLOW', includes: { arches: ['s390x'] } },
      { names: ['setns'], action: 'SCMP_ACT_ALLOW', includes: { caps: ['CAP_SYS_ADMIN'] } },
      { names: ['bpf'], action: 'SCMP_ACT_ERRNO', errnoRet: 1, excludes: { caps: ['CAP_SYS_ADMIN'] } },
    ],
  }),
);
const ctx = (o: Partial<PodContext> = {}): PodContext => ({
  rootfs: '/rootfs',
  image: {
    Entrypoint: ['/usr/local/bin/node', '/app/dist/bin/flowhint.js'],
    Cmd: ['--help'],
    Env: ['PATH=/usr/bin'],
    User: '65532:65532',
  },
  netnsPath: '/var/run/netns/node',
  fields: { 'spec.nodeName': 'node-a', 'status.hostIP': '192.0.2.10' },
  hostPaths: { '/run/flowhint': join(dir, 'run') },
  secrets: { 'flowhint-webhook-tls': join(dir, 'tls') },
  scratch: dir,
  serviceAccount: { dir: join(dir, 'sa'), host: '192.0.2.1', port: 6443 },
  cgroupsPath: '/test/x',
  seccompProfile: file,
  ...o,
});
const docs = loadAll(kustomizeBuild('manifests/overlays/cert-manager')) as Array<Record<string, any>>;
const pod = (kind: string) => structuredClone(docs.find((d) => d.kind === kind)!.spec.template.spec);

t.test('quantities and $(VAR)', async (t) => {
  t.equal(bytes('256Mi'), 268435456);
  t.equal(bytes('1Gi'), 1073741824);
  t.equal(bytes('500M'), 500000000);
  t.throws(() => bytes('1.5Gi'), /untranslated quantity/);
  t.equal(cpuShares('20m'), 20, '20 * 1024 / 1000, floored');
  t.equal(cpuShares('1'), 1024);
  t.equal(cpuShares('1m'), 2, 'at least 2');
  t.equal(
    expand('--host $(HOST_IP) $(MISSING) $$(HOST_IP)', { HOST_IP: '10.0.0.1' }),
    '--host 10.0.0.1 $(MISSING) $(HOST_IP)',
  );
});

t.test('the agent DaemonSet: root with NET_ADMIN only, the node network, its hostPath, in-cluster env', async (t) => {
  const x = translatePod(pod('DaemonSet'), 'agent', ctx());
  const p = x.spec.process as Record<string, any>;
  t.same(p.user, { uid: 0, gid: 65532 }, 'runAsUser 0; the group stays the image’s');
  t.same(p.capabilities, { bounding: ['CAP_NET_ADMIN'], effective: ['CAP_NET_ADMIN'], permitted: ['CAP_NET_ADMIN'] });
  t.equal(p.noNewPrivileges, true);
  t.same(p.args.slice(2, 5), ['agent', '--metrics-host', '192.0.2.10'], '$(HOST_IP) from status.hostIP');
  t.ok(p.env.includes('NODE_NAME=node-a'));
  t.ok(p.env.includes('KUBERNETES_SERVICE_HOST=192.0.2.1') && p.env.includes('KUBERNETES_SERVICE_PORT=6443'));
  t.match(x.spec, { root: { readonly: true }, hostname: 'node-a' });
  const mounts = x.spec.mounts as Array<Record<string, any>>;
  t.match(
    mounts.find((m) => m.destination === '/run/flowhint'),
    { source: join(dir, 'run'), options: ['rbind', 'rprivate', 'rw'] },
  );
  t.match(
    mounts.find((m) => m.destination === '/var/run/secrets/kubernetes.io/serviceaccount'),
    { options: ['rbind', 'rprivate', 'ro'] },
  );
  t.notOk(
    mounts.some((m) => String(m.destination).startsWith('/proc/')),
    'nothing mounted inside /proc',
  );
  const linux = x.spec.linux as Record<string, any>;
  t.same(linux.namespaces.at(-1), { type: 'network', path: '/var/run/netns/node' });
  t.equal(linux.resources.memory.limit, x.memoryLimitBytes);
  t.ok(linux.maskedPaths.includes('/proc/kcore') && linux.readonlyPaths.includes('/proc/sys'));
  t.equal(x.graceSeconds, 30);
  t.same(x.probes.readiness, { path: '/readyz', port: 9471, scheme: 'HTTP' });
});

t.test(
  'the webhook Deployment: non-root, no capabilities, its Secret read-only, no ServiceAccount token',
  async (t) => {
    const x = translatePod(pod('Deployment'), 'webhook', ctx());
    const p = x.spec.process as Record<string, any>;
    t.same(p.user, { uid: 65532, gid: 65532 });
    t.same(p.capabilities, { bounding: [], effective: [], permitted: [] }, 'drop ALL');
    const mounts = x.spec.mounts as Array<Record<string, any>>;
    t.match(
      mounts.find((m) => m.destination === '/tls'),
      { source: join(dir, 'tls'), options: ['rbind', 'rprivate', 'ro'] },
    );
    t.notOk(
      mounts.some((m) => String(m.destination).includes('serviceaccount')),
      'automountServiceAccountToken: false',
    );
    t.notOk(p.env.some((e: string) => e.startsWith('KUBERNETES_SERVICE_HOST=')));
    t.same(x.probes.readiness, { path: '/readyz', port: 8443, scheme: 'HTTPS' });
  },
);

t.test('a field it does not translate fails by name; so do runAsNonRoot as root and privileged', async (t) => {
  const a = pod('DaemonSet');
  a.shareProcessNamespace = true;
  t.throws(() => translatePod(a, 'agent', ctx()), /untranslated field: spec\.shareProcessNamespace/);
  const b = pod('DaemonSet');
  b.containers[0].securityContext.procMount = 'Unmasked';
  t.throws(
    () => translatePod(b, 'agent', ctx()),
    /untranslated field: spec\.containers\[0\]\.securityContext\.procMount/,
  );
  const c = pod('DaemonSet');
  c.volumes.push({ name: 'cfg', configMap: { name: 'x' } });
  t.throws(() => translatePod(c, 'agent', ctx()), /untranslated field: spec\.volumes\[1\]\.configMap/);
  const d = pod('Deployment');
  d.securityContext.runAsUser = 0;
  t.throws(() => translatePod(d, 'webhook', ctx()), /runAsNonRoot/);
  const e = pod('DaemonSet');
  e.containers[0].securityContext.privileged = true;
  t.throws(() => translatePod(e, 'agent', ctx()), /privileged/);
});

t.test('RuntimeDefault seccomp: entries for amd64 and the capabilities held', async (t) => {
  const s = seccompFor(file, ['CAP_NET_ADMIN']);
  t.same(s, {
    defaultAction: 'SCMP_ACT_ERRNO',
    defaultErrnoRet: 38,
    architectures: ['SCMP_ARCH_X86_64', 'SCMP_ARCH_X86'],
    syscalls: [
      { names: ['read'], action: 'SCMP_ACT_ALLOW' },
      { names: ['arch_prctl'], action: 'SCMP_ACT_ALLOW' },
      { names: ['bpf'], action: 'SCMP_ACT_ERRNO', errnoRet: 1 },
    ],
  });
  t.same(
    (seccompFor(file, ['CAP_SYS_ADMIN']).syscalls as Array<{ names: string[] }>).map((x) => x.names[0]),
    ['read', 'arch_prctl', 'setns'],
  );
});

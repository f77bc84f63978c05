/**
 * The Pods as a cluster runs them (`npm run test:image`, after `npm run image`): the rendered
 * manifests' agent DaemonSet and webhook Deployment, their containers started from the built
 * image by runc, the OCI runtime under containerd and CRI-O on most nodes (Debian's runc
 * 1.1.5 here; containerd 1.6 would start the same runc with the same kind of config.json,
 * and its CRI plugin needs a kubelet to drive it, which this machine has not). Each Pod spec
 * is translated field by field by test/runtime/oci.ts, as the kubelet and containerd do:
 * user, capabilities, no new privileges, read-only root, RuntimeDefault seccomp, masked
 * /proc paths, volumes, the memory limit as the cgroup's, fieldRef env, and the
 * ServiceAccount files for in-cluster config against a fake API server over HTTPS.
 *
 * The node is a scratch network namespace joined to this host by a veth (198.51.100.0/30):
 * the API server listens on the host's end, the agent's metrics on the node's.
 *
 * - The agent starts, reads hinted Services through in-cluster config, programs the node's
 *   namespace, writes its FlowhintNode, answers its probes, and exits 0 within
 *   terminationGracePeriodSeconds of SIGTERM.
 * - It does so beside a full conntrack table (nf_conntrack_max entries) under the manifest's
 *   memory limit: an OOM kill fails the test, and the cgroup's peak is printed.
 * - The webhook serves AdmissionReviews over HTTPS as its non-root user, read-only root, no
 *   capabilities, with its certificate from the mounted Secret.
 */
import t from 'tap';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'node:http';
import { loadAll } from 'js-yaml';
import { z } from 'zod';
import { generateCerts } from '../../certs/generate.ts';
import { decodePatch, post, review } from '../helpers/admission.ts';
import { eventually } from '../helpers/eventually.ts';
import { FakeApiServer } from '../helpers/fake-apiserver.ts';
import { FakeFlowhintNodes } from '../helpers/fake-flowhintnodes.ts';
import { apiService } from '../helpers/kube-agent.ts';
import { kustomizeBuild } from '../helpers/kustomize.ts';
import { HINT, completeService } from '../helpers/services.ts';
import { fillConntrackIn } from '../helpers/conntrack-fill.ts';
import { translatePod, type ImageConfig, type Probe } from '../runtime/oci.ts';

// A full conntrack table and a 15 s poll take longer than tap's default 30 s.
t.setTimeout(600_000);
const IMAGE = process.env.FLOWHINT_IMAGE ?? 'localhost/flowhint:dev';
/** The cert-manager overlay: the self-managed one needs certificates generated into it first. */
const OVERLAY = 'manifests/overlays/cert-manager';
const SECCOMP = '/usr/share/containers/seccomp.json';
const HOST = '198.51.100.1';
const NODE_IP = '198.51.100.2';
const POD_HOST = '198.51.100.5';
const POD_IP = '198.51.100.6';

type Obj = Record<string, any>;
const sh = (...a: string[]) => execFileSync(a[0]!, a.slice(1), { encoding: 'utf8' }).trim();
const docs = loadAll(kustomizeBuild(OVERLAY)) as Obj[];
const podOf = (kind: string, name: string) =>
  docs.find((d) => d.kind === kind && d.metadata.name === name)!.spec.template.spec as Obj;

const Inspect = z.object({
  OCIv1: z.object({
    config: z.object({
      Entrypoint: z.array(z.string()),
      Cmd: z.array(z.string()).nullish(),
      Env: z.array(z.string()).nullish(),
      User: z.string().nullish(),
      WorkingDir: z.string().nullish(),
    }),
  }),
});
const image: ImageConfig = Inspect.parse(JSON.parse(sh('buildah', 'inspect', '--type', 'image', IMAGE))).OCIv1.config;
const container = sh('buildah', 'from', '--quiet', IMAGE);
const rootfs = sh('buildah', 'mount', container);
const work = mkdtempSync(join(tmpdir(), 'flowhint-pods-'));
chmodSync(work, 0o755);
t.teardown(() => {
  sh('buildah', 'umount', container);
  sh('buildah', 'rm', container);
  rmSync(work, { recursive: true, force: true });
});

/** A network namespace joined to the host by a veth, `host` on the host's end, `inside` on its own. */
function netns(name: string, host: string, inside: string): string {
  sh('ip', 'netns', 'add', name);
  const nsx = (...a: string[]) => sh('ip', 'netns', 'exec', name, ...a);
  sh('ip', 'link', 'add', `${name}-h`, 'type', 'veth', 'peer', 'name', `${name}-n`, 'netns', name);
  sh('ip', 'addr', 'add', `${host}/30`, 'dev', `${name}-h`);
  sh('ip', 'link', 'set', `${name}-h`, 'up');
  nsx('ip', 'link', 'set', 'lo', 'up');
  nsx('ip', 'addr', 'add', `${inside}/30`, 'dev', `${name}-n`);
  nsx('ip', 'link', 'set', `${name}-n`, 'up');
  return `/var/run/netns/${name}`;
}

interface Running {
  id: string;
  /** Set once the container has exited. */
  done: { code?: number | null };
  out: () => string;
  exited: Promise<number | null>;
  cgroup: string;
}

/** `runc run` of a translated config; killed and deleted at teardown. */
function runc(tt: { teardown: (fn: () => void) => void }, id: string, spec: Obj): Running {
  const bundle = join(work, id);
  mkdirSync(bundle, { recursive: true });
  writeFileSync(join(bundle, 'config.json'), JSON.stringify(spec, null, 2));
  const child = spawn('runc', ['run', '--bundle', bundle, id], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr.on('data', (c: Buffer) => (out += c.toString()));
  const done: { code?: number | null } = {};
  const exited = new Promise<number | null>((r) =>
    child.once('exit', (code, signal) => r(code ?? (signal ? 128 : null))),
  );
  tt.teardown(() => {
    spawnSync('runc', ['kill', id, 'KILL']);
    spawnSync('runc', ['delete', '--force', id]);
  });
  void exited.then((code) => (done.code = code));
  return { id, done, out: () => out, exited, cgroup: String(spec.linux.cgroupsPath) };
}

/** The container's memory cgroup as runc set it up: cgroup v1 (this machine) or v2 (unified). */
function memoryCgroup(path: string): { limit: number; peak: number | undefined; anon: number; oomKills: number } {
  const v1 = `/sys/fs/cgroup/memory${path}`;
  const read = (f: string) => readFileSync(f, 'utf8').trim();
  if (existsSync(v1))
    return {
      limit: Number(read(`${v1}/memory.limit_in_bytes`)),
      peak: Number(read(`${v1}/memory.max_usage_in_bytes`)),
      anon: Number(/^total_rss (\d+)/m.exec(read(`${v1}/memory.stat`))?.[1] ?? 0),
      oomKills: Number(/oom_kill (\d+)/.exec(read(`${v1}/memory.oom_control`))?.[1] ?? 0),
    };
  const v2 = `/sys/fs/cgroup${path}`;
  return {
    limit: Number(read(`${v2}/memory.max`)),
    peak: existsSync(`${v2}/memory.peak`) ? Number(read(`${v2}/memory.peak`)) : undefined,
    anon: Number(/^anon (\d+)/m.exec(read(`${v2}/memory.stat`))?.[1] ?? 0),
    oomKills: Number(/oom_kill (\d+)/.exec(read(`${v2}/memory.events`))?.[1] ?? 0),
  };
}

function httpGet(url: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, (res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

const probeUrl = (p: Probe, ip: string) => `${p.scheme.toLowerCase()}://${ip}:${p.port}${p.path}`;

t.test(
  'the agent Pod under runc: in-cluster config, programs the node, probes, FlowhintNode, SIGTERM',
  { timeout: 300_000 },
  async (t) => {
    const nsName = `fhpn${process.pid % 100000}`;
    const nodeNetns = netns(nsName, HOST, NODE_IP);
    t.teardown(() => {
      spawnSync('ip', ['netns', 'del', nsName]);
    });
    // The API server, over HTTPS, with the ServiceAccount files a Pod gets.
    const certs = await generateCerts({ dnsNames: ['kubernetes.default.svc'], ipAddresses: [HOST] });
    const api = new FakeApiServer({ tls: { cert: certs.cert, key: certs.key }, host: HOST });
    await api.start();
    t.teardown(() => api.stop());
    const fhn = new FakeFlowhintNodes(api);
    fhn.addNode('node-a');
    t.teardown(() => fhn.release());
    api.apply(apiService({ name: 'video', clusterIPs: ['10.96.44.44'], ports: [{ port: 1935 }] }));
    api.apply(
      apiService({
        name: 'dns',
        hint: 'ShortLived',
        clusterIPs: ['10.96.0.53'],
        ports: [{ port: 53, protocol: 'UDP' }],
      }),
    );
    const sa = join(work, 'sa-agent');
    mkdirSync(sa, { recursive: true });
    writeFileSync(join(sa, 'token'), 'test-token');
    writeFileSync(join(sa, 'ca.crt'), certs.caCert);
    writeFileSync(join(sa, 'namespace'), 'flowhint-system');

    const pod = podOf('DaemonSet', 'flowhint-agent');
    const state = join(work, 'node-run-flowhint');
    const x = translatePod(pod, 'agent', {
      rootfs,
      image,
      netnsPath: nodeNetns,
      fields: { 'spec.nodeName': 'node-a', 'status.hostIP': NODE_IP },
      hostPaths: { '/run/flowhint': state },
      secrets: {},
      scratch: join(work, 'agent-scratch'),
      serviceAccount: { dir: sa, host: HOST, port: api.listenPort },
      cgroupsPath: `/flowhint-test/agent-${process.pid}`,
      seccompProfile: SECCOMP,
    });
    t.ok(x.memoryLimitBytes, 'the manifest sets a memory limit');
    const c = runc(t, `fh-agent-${process.pid}`, x.spec);
    // flowhint's three tables: inet (the forward path), ip and ip6 (each family's NAT chains).
    const table = () =>
      ['inet', 'ip', 'ip6']
        .map(
          (f) =>
            spawnSync('ip', ['netns', 'exec', nsName, 'nft', 'list', 'table', f, 'flowhint'], { encoding: 'utf8' })
              .stdout,
        )
        .join('');
    const up = (ok: () => boolean) => () => {
      if ('code' in c.done) throw new Error(`the container exited (${c.done.code}): ${c.out()}`);
      return ok();
    };
    await eventually(
      'the agent programmed the node',
      up(() => table().includes('10.96.44.44')),
      {
        timeoutMs: 120_000,
      },
    ).catch(() => t.fail(`not programmed; container output:\n${c.out()}`));
    t.match(table(), /10\.96\.0\.53 \. udp \. 53/, 'the ShortLived Service too');

    const ready = await eventually(
      'readiness probe answers 200',
      async () => (await httpGet(probeUrl(x.probes.readiness!, NODE_IP)).catch(() => ({ status: 0 }))).status === 200,
      { timeoutMs: 60_000 },
    );
    t.ok(ready);
    t.equal((await httpGet(probeUrl(x.probes.liveness!, NODE_IP))).status, 200, 'liveness probe 200');
    const programmed = () =>
      (fhn.read('node-a') as { status?: { services?: { programmed?: number } } } | undefined)?.status?.services
        ?.programmed;
    await eventually('its FlowhintNode reports both Services programmed', () => programmed() === 2, {
      timeoutMs: 60_000,
    }).catch(() => t.fail(`FlowhintNode: ${JSON.stringify(fhn.read('node-a'))}`));
    t.equal(programmed(), 2, 'the FlowhintNode says 2 programmed');

    // A busy node: its conntrack table filled to nf_conntrack_max (the agent's ct rules turned
    // conntrack on in the namespace; 10.0.0.0/8 is made local on lo for the fill).
    sh('ip', 'netns', 'exec', nsName, 'ip', 'addr', 'add', '10.0.0.1/8', 'dev', 'lo');
    const max = Number(readFileSync('/proc/sys/net/netfilter/nf_conntrack_max', 'utf8'));
    const entries = fillConntrackIn(nsName, max, 2);
    t.ok(entries >= max * 0.99, `the node's conntrack table is full: ${entries} of ${max}`);
    // The agent polls conntrack every 15 s: a poll has run against the full table after 17.
    await new Promise((r) => setTimeout(r, 17_000));
    t.equal(spawnSync('runc', ['state', c.id], { encoding: 'utf8' }).stdout.match(/"status": "(\w+)"/)?.[1], 'running');
    const metrics = `http://${NODE_IP}:${x.probes.readiness!.port}/metrics`;
    t.match(
      (await httpGet(metrics)).body,
      /flowhint_agent_conntrack_entries\{service="demo\/dns"\} \d+/,
      'the poll counted',
    );
    const mem = memoryCgroup(c.cgroup);
    t.equal(mem.limit, x.memoryLimitBytes, "the cgroup's limit is the manifest's");
    t.equal(mem.oomKills, 0, 'no OOM kill under the manifest limit');
    // The peak counts page cache (the image's files as the container read them), which the
    // kernel reclaims before it kills; anonymous memory is what the agent itself holds.
    const mib = (n: number | undefined) => (n === undefined ? '?' : (n / 2 ** 20).toFixed(1));
    t.comment(
      `agent container beside ${entries} conntrack entries: anonymous ${mib(mem.anon)} MiB now, peak with page cache ${mib(mem.peak)} MiB, limit ${mib(x.memoryLimitBytes)} MiB`,
    );

    // The agent reads the acct record from its state dir: the hostPath holds what it wrote.
    t.ok(existsSync(join(state, 'conntrack-acct-found')), 'the state directory is the hostPath');
    t.match(
      spawnSync('runc', ['exec', c.id, 'flowhint', 'status'], { encoding: 'utf8' }).stdout,
      /demo\/video/,
      '`kubectl exec … -- flowhint status`: flowhint on the PATH',
    );

    const t0 = Date.now();
    sh('runc', 'kill', c.id, 'TERM');
    const code = await c.exited;
    t.equal(code, 0, 'exit 0 on SIGTERM');
    t.ok(Date.now() - t0 < x.graceSeconds * 1000, `within terminationGracePeriodSeconds (${x.graceSeconds} s)`);
  },
);

t.test(
  'the webhook Pod under runc: non-root, read-only, no capabilities, its Secret, HTTPS',
  { timeout: 120_000 },
  async (t) => {
    const nsName = `fhpw${process.pid % 100000}`;
    const podNetns = netns(nsName, POD_HOST, POD_IP);
    t.teardown(() => {
      spawnSync('ip', ['netns', 'del', nsName]);
    });
    const certs = await generateCerts({ dnsNames: ['flowhint-webhook.flowhint-system.svc'], ipAddresses: [POD_IP] });
    const secret = join(work, 'secret-tls');
    mkdirSync(secret, { recursive: true });
    writeFileSync(join(secret, 'tls.crt'), certs.cert);
    writeFileSync(join(secret, 'tls.key'), certs.key);
    writeFileSync(join(secret, 'ca.crt'), certs.caCert);
    // A Secret volume's files, defaultMode 0644 (the kubelet's default).
    chmodSync(secret, 0o755);
    for (const f of ['tls.crt', 'tls.key', 'ca.crt']) chmodSync(join(secret, f), 0o644);
    const pod = podOf('Deployment', 'flowhint-webhook');
    const secretName = String(pod.volumes.find((v: Obj) => v.secret).secret.secretName);
    const x = translatePod(pod, 'webhook', {
      rootfs,
      image,
      netnsPath: podNetns,
      fields: { 'metadata.name': 'flowhint-webhook-0' },
      hostPaths: {},
      secrets: { [secretName]: secret },
      scratch: join(work, 'webhook-scratch'),
      cgroupsPath: `/flowhint-test/webhook-${process.pid}`,
      seccompProfile: SECCOMP,
    });
    t.match(x.spec, {
      process: { user: { uid: 65532 }, capabilities: { effective: [], bounding: [] } },
      root: { readonly: true },
    });
    const c = runc(t, `fh-webhook-${process.pid}`, x.spec);
    const ca = certs.caCert;
    const url = `https://${POD_IP}:${x.probes.readiness!.port}`;
    await eventually(
      'readiness probe answers 200 over HTTPS',
      async () =>
        (await post(url, x.probes.readiness!.path, '', { ca, method: 'GET' }).catch(() => ({ status: 0 }))).status ===
        200,
      { timeoutMs: 60_000 },
    ).catch(() => t.fail(`not ready; container output:\n${c.out()}`));
    const pid = Number(sh('runc', 'ps', '--format', 'json', c.id).match(/\d+/)![0]);
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    t.match(status, /^Uid:\t65532\t/m, 'uid 65532');
    t.match(status, /^CapEff:\t0000000000000000$/m, 'no capabilities');
    t.match(status, /^NoNewPrivs:\t1$/m, 'no new privileges');
    t.match(status, /^Seccomp:\t2$/m, 'a seccomp filter');
    const mutate = await post(
      url,
      '/mutate',
      JSON.stringify(review({ object: completeService({ annotations: { [HINT]: ' longlived' } }) })),
      {
        ca,
      },
    );
    t.equal(mutate.status, 200);
    t.same(decodePatch(mutate.json.response), [
      { op: 'add', path: '/metadata/labels/flowhint.dev~1traffic-hint', value: 'LongLived' },
      { op: 'replace', path: '/metadata/annotations/flowhint.dev~1traffic-hint', value: 'LongLived' },
    ]);
    sh('runc', 'kill', c.id, 'TERM');
    t.equal(await c.exited, 0, 'exit 0 on SIGTERM');
  },
);

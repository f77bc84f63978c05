/**
 * The built image, run for real (`npm run test:image`, after `npm run image`; CI runs both).
 * There is no container engine here: each process runs with `buildah run --isolation chroot`
 * in a working container of the image, which applies the image's user, environment and root
 * file system, and the test reads the entrypoint from the image's own config. The Pod's
 * capabilities are applied the way a runtime would: `--cap-add NET_ADMIN`, then `setpriv`
 * narrows the bounding set to it alone, as `capabilities: {drop: [ALL], add: [NET_ADMIN]}`.
 *
 * Checks: --help and version from the entrypoint; the webhook as the image's non-root user,
 * answering AdmissionReviews over HTTPS with certificates made by `flowhint certs`, and
 * ending on SIGTERM; the agent, uid 0 with NET_ADMIN only, programming a scratch network
 * namespace with the image's own nft; then the image's size and what makes it up.
 */
import t from 'tap';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer } from 'node:net';
import { z } from 'zod';
import { decodePatch, post, review } from '../helpers/admission.ts';
import { eventually } from '../helpers/eventually.ts';
import { createNetns } from '../helpers/netns.ts';
import { HINT, completeService, hinted } from '../helpers/services.ts';
import { imageReport } from './size.ts';

const IMAGE = process.env.FLOWHINT_IMAGE ?? 'localhost/flowhint:dev';
const VERSION = z.object({ version: z.string() }).parse(JSON.parse(readFileSync('package.json', 'utf8'))).version;
const Config = z.object({
  Entrypoint: z.array(z.string()),
  Cmd: z.array(z.string()).nullish(),
  User: z.string().nullish(),
});

const buildah = (...args: string[]) => execFileSync('buildah', args, { encoding: 'utf8' }).trim();
const Inspect = z.object({ OCIv1: z.object({ config: Config }) });
const config = Inspect.parse(JSON.parse(buildah('inspect', '--type', 'image', IMAGE))).OCIv1.config;
const container = buildah('from', '--quiet', IMAGE);
t.teardown(() => {
  buildah('rm', container);
});
const work = mkdtempSync(join(tmpdir(), 'flowhint-image-'));
chmodSync(work, 0o755);
t.teardown(() => {
  rmSync(work, { recursive: true, force: true });
});

/** `buildah run` argv for the entrypoint with these arguments (and run options before `--`). */
const run = (opts: string[], ...args: string[]) => [
  'run',
  '--isolation',
  'chroot',
  ...opts,
  container,
  '--',
  ...config.Entrypoint,
  ...args,
];

async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const address = s.address();
  await new Promise((r) => s.close(r));
  if (address === null || typeof address === 'string') throw new Error('no port');
  return address.port;
}

function status(pid: number): Record<string, string> {
  return Object.fromEntries(
    readFileSync(`/proc/${pid}/status`, 'utf8')
      .split('\n')
      .map((l) => l.split(':\t') as [string, string]),
  );
}

t.test('the entrypoint: --help (the default command) and version', async (t) => {
  t.same(config.Cmd, ['--help'], 'CMD is --help');
  const help = spawnSync('buildah', run([], ...(config.Cmd ?? [])), { encoding: 'utf8' });
  t.equal(help.status, 0, help.stderr);
  t.match(help.stdout, /^usage: flowhint <command>/);
  for (const c of ['webhook', 'agent', 'status', 'cleanup', 'explain', 'backfill', 'demo', 'certs', 'version'])
    t.match(help.stdout, new RegExp(`^  ${c} `, 'm'), `lists ${c}`);
  const version = spawnSync('buildah', run([], 'version'), { encoding: 'utf8' });
  t.equal(version.status, 0);
  t.match(
    version.stdout,
    new RegExp(`^flowhint ${VERSION.replaceAll('.', '\\.')} \\(node v24\\.`),
    'package version, Node 24',
  );
});

t.test('the webhook as the non-root user: AdmissionReviews over HTTPS, then SIGTERM', async (t) => {
  t.equal(config.User, '65532:65532', 'the Dockerfile sets a non-root user');
  const certs = join(work, 'certs');
  execFileSync(process.execPath, [
    'bin/flowhint.ts',
    'certs',
    '--out',
    certs,
    '--dns-name',
    'localhost',
    '--ip',
    '127.0.0.1',
  ]);
  chmodSync(certs, 0o755);
  for (const f of ['tls.crt', 'tls.key']) chmodSync(join(certs, f), 0o644); // as a Secret volume's defaultMode
  const [port, metrics] = [await freePort(), await freePort()];
  const child = spawn(
    'buildah',
    run(
      ['--volume', `${certs}:/certs:ro`],
      'webhook',
      '--cert',
      '/certs/tls.crt',
      '--key',
      '/certs/tls.key',
      '--host',
      '127.0.0.1',
      '--port',
      String(port),
      '--metrics-port',
      String(metrics),
    ),
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let out = '';
  child.stdout.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr.on('data', (c: Buffer) => (out += c.toString()));
  const exited = new Promise<number | null>((r) => child.once('exit', r));
  t.teardown(() => {
    child.kill('SIGKILL');
  });
  await eventually('the webhook listening', () => out.includes('"msg":"webhook listening"'), { timeoutMs: 60_000 });
  const pid = Number(
    execFileSync('pgrep', ['-f', `^/usr/local/bin/node /app/dist/bin/flowhint.js webhook .*--port ${port}`], {
      encoding: 'utf8',
    }).trim(),
  );
  const proc = status(pid);
  t.equal(proc.Uid?.split('\t')[0], '65532', 'runs as uid 65532');
  t.equal(proc.CapEff, '0000000000000000', 'with no capabilities');

  const ca = readFileSync(join(certs, 'ca.crt'), 'utf8');
  const url = `https://localhost:${port}`;
  const mutate = await post(
    url,
    '/mutate',
    JSON.stringify(review({ object: completeService({ annotations: { [HINT]: ' longlived' } }) })),
    { ca },
  );
  t.equal(mutate.status, 200);
  t.match(mutate.json, {
    response: { uid: '705ab4f5-6393-11e8-b7cc-42010a800002', allowed: true, patchType: 'JSONPatch' },
  });
  t.same(
    decodePatch(mutate.json.response),
    [
      { op: 'add', path: '/metadata/labels/flowhint.dev~1traffic-hint', value: 'LongLived' },
      { op: 'replace', path: '/metadata/annotations/flowhint.dev~1traffic-hint', value: 'LongLived' },
    ],
    '/mutate: the canonical value and the mirror label',
  );
  const validate = await post(url, '/validate', JSON.stringify(review({ object: hinted('Turbo', {}, null) })), { ca });
  t.match(
    validate.json,
    { response: { allowed: false, status: { code: 422, reason: 'Invalid' } } },
    '/validate: denied',
  );

  process.kill(pid, 'SIGTERM');
  await eventually('the webhook gone after SIGTERM', () => spawnSync('kill', ['-0', String(pid)]).status !== 0);
  t.equal(await exited, 0, 'exit 0');
  t.match(out, /"signal":"SIGTERM","msg":"shutting down"/);
});

t.test('the agent, uid 0 with NET_ADMIN only, programs a network namespace with the image’s nft', async (t) => {
  const ns = createNetns();
  t.teardown(() => {
    ns.destroy();
  });
  const services = join(work, 'services');
  const state = join(work, 'state');
  execFileSync('mkdir', ['-p', services, state]);
  chmodSync(services, 0o755);
  writeFileSync(
    join(services, 'video.yaml'),
    [
      'apiVersion: v1',
      'kind: Service',
      'metadata:',
      '  name: video',
      '  namespace: media',
      '  annotations: {flowhint.dev/traffic-hint: LongLived}',
      'spec:',
      '  clusterIP: 10.96.44.44',
      '  clusterIPs: [10.96.44.44]',
      '  ports: [{port: 1935, protocol: TCP}]',
      '',
    ].join('\n'),
  );
  const agent = (bounding: string) =>
    spawnSync(
      'ip',
      [
        'netns',
        'exec',
        ns.name,
        'buildah',
        'run',
        '--isolation',
        'chroot',
        '--user',
        '0:0',
        '--cap-add',
        'CAP_NET_ADMIN',
        '--volume',
        `${services}:/services:ro`,
        '--volume',
        `${state}:/run/flowhint`,
        container,
        '--',
        'setpriv',
        `--bounding-set=${bounding}`,
        '--inh-caps=-all',
        '--no-new-privs',
        '--',
        'sh',
        '-c',
        'grep CapEff /proc/self/status >&2; exec "$@"',
        'sh',
        ...config.Entrypoint,
        'agent',
        '--once',
        '--services-dir',
        '/services',
        '--metrics-port',
        '0',
      ],
      { encoding: 'utf8' },
    );
  const none = agent('-all');
  t.not(none.status, 0, 'without NET_ADMIN the sync fails');
  t.match(none.stderr, /CapEff:\t0000000000000000/);

  const r = agent('-all,+net_admin');
  t.match(r.stderr, /CapEff:\t0000000000001000/, 'the process holds CAP_NET_ADMIN and nothing else');
  t.equal(r.status, 0, `agent --once exits 0\n${r.stdout}${r.stderr}`);
  t.match(r.stdout, /"ok":true/);
  const table = ns.sh('nft', 'list', 'table', 'inet', 'flowhint');
  t.match(table, /elements = \{ 10\.96\.44\.44 : goto v4_[0-9a-f]+ \}/, 'the Service address in the vips map');
  t.match(
    ns.sh('nft', 'list', 'table', 'ip', 'flowhint'),
    /elements = \{ 10\.96\.44\.44 \. tcp \. 1935 \}/,
    'its port marked LongLived (in the IPv4 table, with the NAT chains)',
  );
  t.match(table, /meta l4proto tcp ct original proto-dst 1935 ct packets > 20 /, 'the default threshold');
  // buildah's chroot keeps /proc/sys read-only, so the agent's own `sysctl -w` fails here; the
  // kernel turns accounting on itself once a rule reads `ct packets`, and the agent says so.
  t.match(r.stdout, /"detail":"net\.netfilter\.nf_conntrack_acct is 1[^"]*","msg":"conntrack accounting on"/);
  t.match(readFileSync(join(state, 'status.json'), 'utf8'), /media\/video/, 'status.json for `flowhint status`');
});

t.test('the image size, and what makes it up', async (t) => {
  const report = imageReport(IMAGE);
  writeFileSync('.cache/image/size.txt', report.text);
  t.comment(report.text);
  t.ok(report.totalBytes > 100e6 && report.totalBytes < 1e9, `${(report.totalBytes / 1e6).toFixed(0)} MB`);
});

t.test("the README's tag, and a push (to an OCI archive: there is no registry here)", async (t) => {
  const readme = readFileSync('README.md', 'utf8');
  const tag = /^buildah tag (\S+) (\S+)$/m.exec(readme);
  t.ok(tag, 'the README shows `buildah tag`');
  const [, source = '', target = ''] = tag ?? [];
  t.equal(source, IMAGE, 'of the image `npm run image` builds');
  buildah('tag', source, target);
  t.teardown(() => {
    buildah('rmi', target);
  });
  t.match(readme, new RegExp(`^buildah push ${target.replaceAll('.', '\\.')}$`, 'm'), 'and pushes that tag');
  const archive = join(work, 'image.tar');
  buildah('push', '--quiet', target, `oci-archive:${archive}:${target}`);
  const listing = execFileSync('tar', ['-tf', archive], { encoding: 'utf8' });
  t.match(listing, /^index\.json$/m, 'an OCI image layout');
  t.match(listing, /^blobs\/sha256\/[0-9a-f]{64}$/m);
});

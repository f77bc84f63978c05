/**
 * The image ships the sources bundled into JavaScript (`npm run build`, build/app.ts), not
 * the sources, and no node_modules. This builds it the same way, outside the checkout (so
 * nothing can resolve a dependency from node_modules), runs the bundled `flowhint webhook`
 * as a real process, and checks that it answers admission requests over HTTPS exactly as the
 * TypeScript sources do, with the answers a reader can check by hand (the defaulting patch,
 * the rejection's code). It also keeps the Dockerfile in step with what the bundle is made of.
 */
import t from 'tap';
import { execFile } from 'node:child_process';
import { copyFile, mkdtemp, readFile, readdir, rm } from 'node:fs/promises';
import { isBuiltin } from 'node:module';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { promisify } from 'node:util';
import { buildDist } from './helpers/build.ts';
import { decodePatch, post, review, tempCerts } from './helpers/admission.ts';
import { startWebhookChild, stopChild } from './helpers/child.ts';
import { HINT, THRESHOLD, completeService } from './helpers/services.ts';

const ROOT = new URL('../', import.meta.url).pathname;
// Outside the checkout, as in the image: /app/package.json beside /app/dist.
const APP = await mkdtemp(join(tmpdir(), 'flowhint-build-'));
const OUT = join(APP, 'dist');
t.teardown(() => rm(APP, { recursive: true, force: true }));
await copyFile(join(ROOT, 'package.json'), join(APP, 'package.json'));
const { entry, inputs, externals } = await buildDist(OUT);

async function files(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true });
  return entries.filter((e) => e.isFile()).map((e) => relative(dir, join(e.parentPath, e.name)));
}

t.test('the bundle is plain JavaScript that loads nothing but Node and itself', async (t) => {
  const all = await files(OUT);
  t.ok(all.includes('bin/flowhint.js'), 'bin/flowhint.js');
  t.same(
    all.filter((f) => !f.endsWith('.js') && !f.endsWith('.js.LEGAL.txt')),
    [],
    'nothing but JavaScript and its licence notices',
  );
  for (const dir of ['api/', 'webhook/', 'agent/', 'lib/', 'bin/'])
    t.ok(
      inputs.some((f) => f.startsWith(dir)),
      `${dir} is bundled`,
    );
  t.notOk(
    inputs.some((f) => f.startsWith('test/') || f.startsWith('bench/')),
    'no tests or benchmarks shipped',
  );
  // What esbuild left outside the bundle: only Node's modules, so the image needs no node_modules
  // (the CLI and the webhook below run from outside the checkout, where none could be found).
  // ws (client-node's watch transport) tries its optional native addons in a try/catch; they
  // are not installed with flowhint's dependencies either, and ws runs without them.
  const optional = ['bufferutil', 'utf-8-validate'];
  t.ok(externals.length > 0, 'Node modules are loaded');
  t.same(
    externals.filter((x) => !isBuiltin(x) && !optional.includes(x)),
    [],
    'nothing else',
  );
});

t.test('the bundled CLI runs', async (t) => {
  const { stdout } = await promisify(execFile)(process.execPath, [entry, '--help']);
  t.match(stdout, /usage: flowhint <command>/);
  t.match(stdout, /webhook\s+serve the mutating and validating admission webhook/);
});

t.test('the bundled webhook answers as the sources do', async (t) => {
  const { dir, bundle } = await tempCerts();
  const [compiled, source] = await Promise.all([
    startWebhookChild(`${dir}/tls.crt`, `${dir}/tls.key`, dir, entry),
    startWebhookChild(`${dir}/tls.crt`, `${dir}/tls.key`, dir),
  ]);
  t.teardown(() => Promise.all([stopChild(compiled.child), stopChild(source.child)]));
  const ca = bundle.caCert;

  const toDefault = JSON.stringify(
    review({
      object: completeService({ annotations: { [HINT]: ' longlived ', [THRESHOLD]: '007' }, labels: { app: 'web' } }),
    }),
  );
  const invalid = JSON.stringify(
    review({
      object: completeService({
        annotations: { [HINT]: 'LongLived', [THRESHOLD]: '-1' },
        labels: { app: 'web', [HINT]: 'LongLived' },
      }),
    }),
  );
  for (const [path, body] of [
    ['/mutate', toDefault],
    ['/validate', invalid],
    ['/validate', toDefault],
    ['/mutate', '{"not":"a review"}'],
  ] as const) {
    const [a, b] = await Promise.all([post(compiled.url, path, body, { ca }), post(source.url, path, body, { ca })]);
    t.equal(a.status, b.status, `${path}: same status`);
    t.same(a.json, b.json, `${path}: same answer`);
  }

  // What those answers are, written out by hand.
  const mutated = await post(compiled.url, '/mutate', toDefault, { ca });
  t.equal(mutated.json.response.allowed, true);
  const byPath = (x: { path: string }, y: { path: string }) => x.path.localeCompare(y.path);
  t.same(
    (decodePatch(mutated.json.response) as Array<{ path: string }>).sort(byPath),
    [
      { op: 'replace', path: '/metadata/annotations/flowhint.dev~1offload-after-packets', value: '7' },
      { op: 'replace', path: '/metadata/annotations/flowhint.dev~1traffic-hint', value: 'LongLived' },
      { op: 'add', path: '/metadata/labels/flowhint.dev~1traffic-hint', value: 'LongLived' },
    ],
    'the defaulting patch',
  );
  const rejected = await post(compiled.url, '/validate', invalid, { ca });
  t.equal(rejected.json.response.allowed, false);
  t.equal(rejected.json.response.status.code, 422);
  t.match(
    rejected.json.response.status.details.causes[0].field,
    'metadata.annotations[flowhint.dev/offload-after-packets]',
  );
});

t.test('the Dockerfile bundles from what the bundle is made of and ships only the bundle', async (t) => {
  const dockerfile = await readFile(join(ROOT, 'Dockerfile'), 'utf8');
  const ignore = await readFile(join(ROOT, '.dockerignore'), 'utf8');
  const build = dockerfile.slice(dockerfile.indexOf('AS build'), dockerfile.indexOf('FROM ${BASE_IMAGE}\n'));
  const runtime = dockerfile.slice(dockerfile.indexOf('FROM ${BASE_IMAGE}\n'));
  const pkg = JSON.parse(await readFile(join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
  // The image's part of `npm run build`; the kubectl plugin's bundle after it is not in the image.
  t.equal(pkg.scripts.build, 'node build/app.ts && node plugin/build.ts');
  t.match(build, /^RUN node build\/app.ts$/m, 'npm run build, as the image runs it');
  // Each source the bundle is made of, by the top directory the Dockerfile copies (certs/ file by file).
  const sources = new Set(
    [...inputs.filter((f) => !f.startsWith('node_modules/')), 'build/bundle.ts', 'build/app.ts'].map((f) =>
      f.startsWith('certs/') || f.startsWith('build/') ? f : f.split('/')[0]!,
    ),
  );
  const copied = [...build.matchAll(/^COPY (?!package)(.+) \S+$/gm)].flatMap((m) =>
    m[1]!.split(/\s+/).map((x) => x.replace(/\/$/, '')),
  );
  t.same([...copied].sort(), [...sources].sort(), 'the build stage copies exactly what is bundled');
  const unignored = [...ignore.matchAll(/^!(.+)$/gm)].map((m) => m[1]!.replace(/\/$/, ''));
  t.same(
    unignored.filter((x) => !x.startsWith('package') && x !== 'manifests/examples').sort(),
    [...sources].sort(),
    'the build context holds exactly that',
  );
  t.match(runtime, /^COPY --from=build \/app\/dist\/app \.\/dist$/m);
  t.notMatch(runtime, /^(COPY|ADD|RUN)\b.*node_modules/m, 'the runtime stage copies or installs no node_modules');
  t.match(dockerfile, /ENTRYPOINT \["node", "\/app\/dist\/bin\/flowhint\.js"\]/);
});

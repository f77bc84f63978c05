/**
 * The image ships JavaScript compiled from the sources (`npm run build`), not the sources.
 * This builds it the same way, runs the compiled `flowhint webhook` as a real process, and
 * checks that it answers admission requests over HTTPS exactly as the TypeScript sources do,
 * with the answers a reader can check by hand (the defaulting patch, the rejection's code).
 * It also keeps the Dockerfile in step with tsconfig.build.json.
 */
import t from 'tap';
import { execFile } from 'node:child_process';
import { readFile, readdir, rm } from 'node:fs/promises';
import { join, relative } from 'node:path';
import { promisify } from 'node:util';
import { buildDist } from './helpers/build.ts';
import { decodePatch, post, review, tempCerts } from './helpers/admission.ts';
import { startWebhookChild, stopChild } from './helpers/child.ts';
import { HINT, THRESHOLD, completeService } from './helpers/services.ts';

const ROOT = new URL('../', import.meta.url).pathname;
// Inside the repository, so that the compiled modules resolve node_modules as dist/ does.
const OUT = join(ROOT, '.cache', `build-test-${process.pid}`);
t.teardown(() => rm(OUT, { recursive: true, force: true }));
const entry = await buildDist(OUT);

async function files(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true });
  return entries.filter((e) => e.isFile()).map((e) => relative(dir, join(e.parentPath, e.name)));
}

t.test('the build is plain JavaScript with no import left pointing at a .ts file', async (t) => {
  const all = await files(OUT);
  t.ok(all.includes('bin/flowhint.js'), 'bin/flowhint.js');
  t.ok(
    all.includes('webhook/server.js') && all.includes('agent/agent.js') && all.includes('api/index.js'),
    'each component',
  );
  t.same(
    all.filter((f) => !f.endsWith('.js')),
    [],
    'nothing but .js',
  );
  t.notOk(
    all.some((f) => f.startsWith('test/') || f.startsWith('bench/')),
    'no tests or benchmarks shipped',
  );
  for (const f of all) {
    const text = await readFile(join(OUT, f), 'utf8');
    const tsImports = [...text.matchAll(/(?:from|import\()\s*['"](\.{1,2}\/[^'"]+\.ts)['"]/g)].map((m) => m[1]);
    if (tsImports.length > 0) t.fail(`${f} imports ${tsImports.join(', ')}`);
  }
});

t.test('the compiled CLI runs', async (t) => {
  const { stdout } = await promisify(execFile)(process.execPath, [entry, '--help']);
  t.match(stdout, /usage: flowhint <command>/);
  t.match(stdout, /webhook\s+serve the mutating and validating admission webhook/);
});

t.test('the compiled webhook answers as the sources do', async (t) => {
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

t.test('the Dockerfile builds what tsconfig.build.json compiles and runs its output', async (t) => {
  const dockerfile = await readFile(join(ROOT, 'Dockerfile'), 'utf8');
  const config = JSON.parse(await readFile(join(ROOT, 'tsconfig.build.json'), 'utf8')) as { include: string[] };
  const build = dockerfile.slice(dockerfile.indexOf('AS build'), dockerfile.indexOf('AS deps'));
  t.match(build, /COPY package.json package-lock.json tsconfig.json tsconfig.build.json/);
  const pkg = JSON.parse(await readFile(join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
  // The image's part of `npm run build`; the kubectl plugin's bundle after it is not in the image.
  t.equal(pkg.scripts.build, 'tsc -p tsconfig.build.json && node plugin/build.ts');
  t.match(
    build,
    /RUN node node_modules\/typescript\/bin\/tsc -p tsconfig.build.json/,
    'npm run build, as the image runs it',
  );
  const copied = [...build.matchAll(/^COPY (?!package)(.+) \S+$/gm)].flatMap((m) => m[1]!.split(/\s+/));
  t.same([...copied].sort(), [...config.include].sort(), 'the build stage copies exactly the compiled sources');
  t.match(dockerfile, /COPY --from=build \/app\/dist \.\/dist/);
  t.match(dockerfile, /ENTRYPOINT \["node", "\/app\/dist\/bin\/flowhint\.js"\]/);
});

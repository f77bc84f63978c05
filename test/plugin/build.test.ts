/**
 * The kubectl plugin as a user installs it: plugin/build.ts bundles it, `npm pack` makes the
 * tarball, `npm install -g` installs it into a scratch prefix, and it runs with the system's
 * Node (20 here, not the project's 24) and no checkout on PATH, directly and through kubectl,
 * against the FAKE API server (test/helpers/explain-cluster.ts).
 */
import t from 'tap';
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { explainCluster } from '../helpers/explain-cluster.ts';

const ROOT = new URL('../../', import.meta.url).pathname;
/** npm, as the npm running the tests (npm_execpath), else the one on PATH. */
const npm = (args: string[], encoding: 'utf8' | undefined = 'utf8') => {
  const cli = process.env.npm_execpath;
  return cli ? execFileSync(process.execPath, [cli, ...args], { encoding }) : execFileSync('npm', args, { encoding });
};

/** The system's node (not node_modules' 24), and its major version. */
function systemNode(): { dir: string; major: number } | undefined {
  for (const dir of ['/usr/bin', '/usr/local/bin']) {
    const node = join(dir, 'node');
    if (!existsSync(node)) continue;
    const v = spawnSync(node, ['--version'], { encoding: 'utf8' }).stdout.trim();
    return { dir, major: Number(/^v(\d+)\./.exec(v)?.[1] ?? 0) };
  }
  return undefined;
}

t.test('bundled, packed, installed with npm -g, run by Node 20 through kubectl', async (t) => {
  const node = systemNode();
  if (!node) {
    t.fail('no system node in /usr/bin or /usr/local/bin: the plugin must run on Node 20 without the checkout');
    return;
  }
  const c = await explainCluster(t);
  execFileSync(process.execPath, [join(ROOT, 'plugin/build.ts')], { stdio: 'ignore' });
  const packed = npm(['pack', join(ROOT, 'dist/plugin'), '--pack-destination', c.dir, '--json']);
  const tarball = join(c.dir, (JSON.parse(packed) as Array<{ filename: string }>)[0]!.filename);
  t.match(tarball, /kubectl-flowhint-\d+\.\d+\.\d+\.tgz$/);
  const prefix = join(c.dir, 'prefix');
  mkdirSync(prefix);
  npm(['install', '-g', '--prefix', prefix, '--no-audit', '--no-fund', '--offline', tarball]);
  const installed = join(prefix, 'lib/node_modules/kubectl-flowhint');
  t.same(readdirSync(installed).sort(), [
    'README.md',
    'flowhint.krew.yaml',
    'kubectl-flowhint.mjs',
    'kubectl-flowhint.mjs.LEGAL.txt',
    'package.json',
  ]);
  t.notOk(existsSync(join(installed, 'node_modules')), 'one file: no dependencies installed');
  t.match(readFileSync(join(installed, 'flowhint.krew.yaml'), 'utf8'), /^ {2}version: v\d+\.\d+\.\d+$/m);
  // Only the installed plugin and the system's tools: no checkout, no Node 24.
  const PATH = `${join(prefix, 'bin')}:${node.dir}:/usr/sbin:/usr/bin:/sbin:/bin`;
  t.equal(node.major, 20, `the system's Node is 20 (${node.major}): the oldest the plugin supports`);
  const version = await c.run(['version'], join(prefix, 'bin/kubectl-flowhint'), { PATH });
  t.equal(version.code, 0, version.err);
  t.match(version.out, new RegExp(`^flowhint \\d+\\.\\d+\\.\\d+ \\(node v${node.major}\\.`));
  const direct = await c.run(['explain', 'shop/cart'], join(prefix, 'bin/kubectl-flowhint'), { PATH });
  t.equal(direct.code, 0, direct.err);
  t.match(direct.out, /^shop\/cart: accepted: LongLived: /m);
  t.match(direct.out, /^programmed on 1 of 2 nodes$/m);
  const refused = await c.run(['agent'], join(prefix, 'bin/kubectl-flowhint'), { PATH });
  t.equal(refused.code, 2, 'node-side commands are not in the plugin');
  t.match(refused.err, /^flowhint: FH_USAGE: unknown command "agent"/);
  const kubectl = spawnSync('sh', ['-c', 'command -v kubectl'], { encoding: 'utf8', env: { PATH } }).stdout.trim();
  if (!kubectl) {
    t.comment('kubectl is not installed here: the plugin was run as kubectl runs it, from PATH');
    return;
  }
  const via = await c.run(['flowhint', 'explain', 'cart', '-n', 'shop'], kubectl, { PATH });
  t.equal(via.code, 0, via.err);
  t.equal(via.out, direct.out, 'kubectl flowhint explain says the same');
});

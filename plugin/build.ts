/**
 * The kubectl plugin as one file (`npm run build`, after tsc): bin/kubectl-flowhint.ts and
 * everything it loads, bundled by esbuild into dist/plugin/kubectl-flowhint.mjs for Node 20
 * or later, beside the package.json, README and krew manifest that `npm pack dist/plugin`
 * turns into an installable tarball (`npm install -g kubectl-flowhint-VERSION.tgz`).
 * No checkout, no `npm ci`, no type stripping: plain JavaScript with its dependencies inside.
 */
import { copyFileSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { bundle, pkg, root } from '../build/bundle.ts';

const OUT = root('dist/plugin');
/** The oldest Node the bundle runs on: Debian bookworm's. */
const PLUGIN_NODE = '20';

rmSync(OUT, { recursive: true, force: true });
mkdirSync(OUT, { recursive: true });
await bundle({
  entries: ['bin/kubectl-flowhint.ts'],
  outdir: OUT,
  node: PLUGIN_NODE,
  single: true,
  // client-node's HTTP client, undici 8, needs Node 22.19 (zstd, structured-clone marks);
  // undici 7 (the devDependency undici-7) has the same Agent, ProxyAgent and fetch on Node 20.
  alias: { undici: 'undici-7' },
});
writeFileSync(
  `${OUT}/package.json`,
  `${JSON.stringify(
    {
      name: 'kubectl-flowhint',
      version: pkg.version,
      description: "kubectl flowhint: what happens to a Service's traffic hint, from kubectl",
      license: pkg.license,
      type: 'module',
      bin: { 'kubectl-flowhint': 'kubectl-flowhint.mjs' },
      engines: { node: `>=${PLUGIN_NODE}` },
      files: ['kubectl-flowhint.mjs', 'kubectl-flowhint.mjs.LEGAL.txt', 'flowhint.krew.yaml'],
    },
    null,
    2,
  )}\n`,
);
copyFileSync(root('plugin/README.md'), `${OUT}/README.md`);
writeFileSync(
  `${OUT}/flowhint.krew.yaml`,
  readFileSync(root('plugin/flowhint.krew.yaml'), 'utf8').replaceAll('VERSION', pkg.version),
);
process.stdout.write(`plugin: ${OUT}/kubectl-flowhint.mjs (flowhint ${pkg.version}, Node >= ${PLUGIN_NODE})\n`);

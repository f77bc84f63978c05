/**
 * How flowhint's JavaScript ships: bundled by esbuild, one way for every artefact that runs
 * outside a checkout (the image's `flowhint`, build/app.ts; the kubectl plugin,
 * plugin/build.ts) and for the agent benchmark's children (bench/lib.ts), so that what
 * bench:agent measures is what the image runs.
 *
 * Why bundled, minified: Node's module loader keeps a record, a resolution and the source of
 * every file it loads, and @kubernetes/client-node alone is about a thousand files. Loading
 * the agent's command (agent/cli.ts) and idling, with the DaemonSet's NODE_OPTIONS, measured
 * on this machine (RSS, MiB): 107 as TypeScript sources (type stripping), 79 as tsc's
 * per-file output, 70 bundled and minified; client-node alone 113 per-file, 94 bundled.
 * Identifiers are minified but names are kept (`keepNames`), so that error and class names
 * in logs read as in the sources.
 */
import { build, type BuildOptions } from 'esbuild';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';

/** A path in the checkout. */
export const root = (path: string) => fileURLToPath(new URL(`../${path}`, import.meta.url));

/** The checkout's package.json fields a bundle carries. */
export const pkg = z
  .object({ version: z.string(), license: z.string() })
  .parse(JSON.parse(readFileSync(root('package.json'), 'utf8')));

/** Run before the bundle's own code: dependencies written as CommonJS call require() for Node's modules. */
const BANNER = `import { createRequire as __flowhintRequire } from 'node:module';
const require = __flowhintRequire(import.meta.url);`;

export interface BundleOptions {
  /** Entry points, as paths in the checkout. */
  entries: string[];
  /** The output directory (absolute); each entry keeps its path under it, shared code goes to chunks/. */
  outdir: string;
  /** The oldest Node the bundle runs on (a major version). */
  node: string;
  /** Module substitutions (esbuild's `alias`). */
  alias?: Record<string, string>;
  /**
   * One self-contained `NAME.mjs` per entry, directly in `outdir`, code loaded on demand
   * included (the kubectl plugin, installed as one file); otherwise entries keep their paths
   * and share chunks.
   */
  single?: boolean;
}

/** The esbuild options of a flowhint bundle (pure: what build() is given). */
export function bundleOptions(o: BundleOptions): BuildOptions {
  return {
    entryPoints: o.entries.map(root),
    outbase: root('.'),
    outdir: o.outdir,
    // Commands load their modules on demand (bin/flowhint.ts): each gets its own chunk, so
    // `flowhint certs` still never loads the agent, nor the agent the webhook.
    ...(o.single
      ? { splitting: false, entryNames: '[name]', outExtension: { '.js': '.mjs' } }
      : { splitting: true, chunkNames: 'chunks/[name]-[hash]' }),
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: `node${o.node}`,
    minify: true,
    keepNames: true,
    // The version without a package.json beside it (lib/version.ts).
    define: { FLOWHINT_BUNDLED_VERSION: JSON.stringify(pkg.version) },
    ...(o.alias ? { alias: o.alias } : {}),
    banner: { js: BANNER },
    legalComments: 'linked',
    logLevel: 'warning',
  };
}

export interface Bundled {
  /** The files written. */
  outputs: string[];
  /** The files bundled, relative to the checkout (node_modules/... for dependencies). */
  inputs: string[];
  /** What the output loads from outside itself (Node's own modules, if nothing else). */
  externals: string[];
}

/** Bundle: what was written, from what. */
export async function bundle(o: BundleOptions): Promise<Bundled> {
  const r = await build({ ...bundleOptions(o), metafile: true, absWorkingDir: root('.') });
  const outputs = Object.values(r.metafile.outputs);
  const externals = new Set(outputs.flatMap((out) => out.imports.filter((i) => i.external).map((i) => i.path)));
  return {
    outputs: Object.keys(r.metafile.outputs),
    inputs: Object.keys(r.metafile.inputs),
    externals: [...externals],
  };
}

/** The image's Node (its BASE_IMAGE, node:24-bookworm-slim). */
export const APP_NODE = '24';

/**
 * The image's `flowhint`: bin/flowhint.ts and everything it loads, into `outdir`
 * (bin/flowhint.js, and chunks/ with one chunk per command loaded on demand).
 */
export async function appBundle(outdir: string): Promise<Bundled & { entry: string }> {
  const b = await bundle({ entries: ['bin/flowhint.ts'], outdir, node: APP_NODE });
  return { ...b, entry: join(outdir, 'bin', 'flowhint.js') };
}

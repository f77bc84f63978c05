/**
 * The JavaScript the image ships (`npm run build`: build/app.ts, bundled by build/bundle.ts),
 * and the benchmark's baseline servers bundled the same way, so that a baseline pays no more
 * for loading its modules than the shipped webhook does.
 */
import { basename, join } from 'node:path';
import { APP_NODE, appBundle, bundle } from '../../build/bundle.ts';

const ROOT = new URL('../../', import.meta.url).pathname;

/** Bundle the image's `flowhint` into `outDir` (default `dist/app/`, as `npm run build`): its entry and inputs. */
export async function buildDist(
  outDir = join(ROOT, 'dist', 'app'),
): Promise<{ entry: string; inputs: string[]; externals: string[] }> {
  return appBundle(outDir);
}

/**
 * Bundle TypeScript programs into `outDir` as the image's code is, each into one file of its
 * own (`NAME.mjs`): a program shares no chunk, so `import.meta.main` stays its own.
 */
export async function bundleFiles(files: readonly string[], outDir: string): Promise<string[]> {
  await bundle({ entries: [...files], outdir: outDir, node: APP_NODE, single: true });
  return files.map((f) => join(outDir, basename(f).replace(/\.ts$/, '.mjs')));
}

/**
 * The image's `flowhint` (`npm run build`; the Dockerfile's build stage): bin/flowhint.ts and
 * everything it loads, bundled by build/bundle.ts into dist/app/ (bin/flowhint.js and its
 * chunks). The image carries that directory as /app/dist and no node_modules. Importing this
 * file builds.
 */
import { rmSync } from 'node:fs';
import { appBundle, pkg, root } from './bundle.ts';

const OUT = root('dist/app');
rmSync(OUT, { recursive: true, force: true });
const b = await appBundle(OUT);
process.stdout.write(
  `app: ${b.entry} and ${b.outputs.length - 1} more files, from ${b.inputs.length} (flowhint ${pkg.version})\n`,
);

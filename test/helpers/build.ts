/**
 * The compiled JavaScript the image ships (`npm run build`: `tsc -p tsconfig.build.json`),
 * and plain-JavaScript copies of the benchmark's baseline servers, so that a baseline pays
 * no more for type stripping than the shipped webhook does.
 */
import { execFile } from 'node:child_process';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { promisify } from 'node:util';
import ts from 'typescript';

const ROOT = new URL('../../', import.meta.url).pathname;

/** Compile the shipped sources into `outDir` (default `dist/`); resolves with the CLI's path. */
export async function buildDist(outDir = join(ROOT, 'dist')): Promise<string> {
  const tsc = join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
  await promisify(execFile)(process.execPath, [tsc, '-p', join(ROOT, 'tsconfig.build.json'), '--outDir', outDir], {
    cwd: ROOT,
  });
  return join(outDir, 'bin', 'flowhint.js');
}

/** Transpile single-file TypeScript modules to JavaScript in `outDir` (imports of `./x.ts` become `./x.js`). */
export async function transpileFiles(files: readonly string[], outDir: string): Promise<string[]> {
  await mkdir(outDir, { recursive: true });
  const out: string[] = [];
  for (const file of files) {
    const source = await readFile(join(ROOT, file), 'utf8');
    const { outputText } = ts.transpileModule(source, {
      fileName: file,
      compilerOptions: {
        module: ts.ModuleKind.ESNext,
        target: ts.ScriptTarget.ES2023,
        rewriteRelativeImportExtensions: true,
        verbatimModuleSyntax: true,
      },
    });
    const target = join(outDir, basename(file).replace(/\.ts$/, '.js'));
    await writeFile(target, outputText);
    out.push(target);
  }
  return out;
}

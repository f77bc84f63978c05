/**
 * What an image weighs and what makes it up: its layers (the instruction that made each, from
 * the image's history, and its size from the manifest) and its largest directories (`du` over
 * the mounted root file system). Printed by the image smoke test and kept in .cache/image/.
 */
import { execFileSync } from 'node:child_process';
import { z } from 'zod';

const Inspect = z.object({
  Manifest: z.string(),
  OCIv1: z.object({
    history: z.array(z.object({ created_by: z.string().optional(), empty_layer: z.boolean().optional() })),
  }),
});
const Manifest = z.object({ layers: z.array(z.object({ size: z.number() })) });

export interface ImageReport {
  totalBytes: number;
  layers: Array<{ bytes: number; createdBy: string }>;
  directories: Array<{ bytes: number; path: string }>;
  text: string;
}

const mb = (bytes: number) => `${(bytes / 1e6).toFixed(1).padStart(6)} MB`;

/** The instruction, without buildah's `/bin/sh -c #(nop)` prefix, on one short line. */
function instruction(createdBy: string): string {
  const s = createdBy.replace(/^\/bin\/sh -c (#\(nop\) )?/, '').replace(/\s+/g, ' ');
  return s.length > 90 ? `${s.slice(0, 87)}...` : s;
}

export function imageReport(image: string, directoryCount = 12): ImageReport {
  const buildah = (...args: string[]) => execFileSync('buildah', args, { encoding: 'utf8' }).trim();
  const inspect = Inspect.parse(JSON.parse(buildah('inspect', '--type', 'image', image)));
  const sizes = Manifest.parse(JSON.parse(inspect.Manifest)).layers.map((l) => l.size);
  const made = inspect.OCIv1.history.filter((h) => h.empty_layer !== true).map((h) => h.created_by ?? '');
  const layers = sizes.map((bytes, i) => ({
    bytes,
    createdBy: i === 0 ? 'the base image (FROM)' : instruction(made[i] ?? ''),
  }));
  const totalBytes = sizes.reduce((a, b) => a + b, 0);

  const container = buildah('from', '--quiet', image);
  let du: string;
  try {
    const root = buildah('mount', container);
    du = execFileSync('du', ['-x', '-B1', '--max-depth=4', root], { encoding: 'utf8', maxBuffer: 64 << 20 })
      .split('\n')
      .filter(Boolean)
      .map((l) => l.replace(root, ''))
      .join('\n');
  } finally {
    buildah('rm', container);
  }
  const all = du.split('\n').map((l) => {
    const [bytes, path] = l.split('\t') as [string, string];
    return { bytes: Number(bytes), path: path || '/' };
  });
  // The largest directories below the top level, leaving out one that is almost all one child.
  const deeper = (d: { path: string; bytes: number }) =>
    all.some((c) => c.path.startsWith(`${d.path}/`) && c.bytes >= 0.95 * d.bytes);
  const directories = all
    .filter((d) => d.path.split('/').length > 2 && !deeper(d))
    .sort((a, b) => b.bytes - a.bytes)
    .slice(0, directoryCount);
  const text = [
    `image ${image}: ${mb(totalBytes).trim()} (uncompressed layers)`,
    'layers:',
    ...layers.map((l) => `  ${mb(l.bytes)}  ${l.createdBy}`),
    'largest directories:',
    ...directories.map((d) => `  ${mb(d.bytes)}  ${d.path}`),
  ].join('\n');
  return { totalBytes, layers, directories, text: `${text}\n` };
}

/**
 * flowhint's version, from package.json: beside the sources (`lib/`), or beside `dist/` in
 * the image. Also the `flowhint_build_info` metric both exporters carry.
 */
import { readFileSync } from 'node:fs';
import { Gauge, type Registry } from 'prom-client';

export function flowhintVersion(): string {
  for (const rel of ['../package.json', '../../package.json']) {
    try {
      const pkg = JSON.parse(readFileSync(new URL(rel, import.meta.url), 'utf8')) as {
        name?: unknown;
        version?: unknown;
      };
      if (pkg.name === 'flowhint' && typeof pkg.version === 'string') return pkg.version;
    } catch {
      // not there: the other layout
    }
  }
  return 'unknown';
}

/** `flowhint_build_info{version,node}` = 1, as Prometheus' own `*_build_info` metrics. */
export function registerBuildInfo(registry: Registry): void {
  const info = new Gauge({
    name: 'flowhint_build_info',
    help: 'flowhint build information: always 1, with the version and the Node.js version as labels.',
    labelNames: ['version', 'node'],
    registers: [registry],
  });
  info.set({ version: flowhintVersion(), node: process.version }, 1);
}

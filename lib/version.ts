/**
 * flowhint's version, from package.json: beside the sources (`lib/`), or beside `dist/` in
 * the image. Also the `flowhint_build_info` metric both exporters carry.
 */
import { readFileSync } from 'node:fs';
import { Gauge, type Registry } from 'prom-client';

/** Written in by the kubectl plugin's bundle (plugin/build.ts); undeclared everywhere else. */
declare const FLOWHINT_BUNDLED_VERSION: string | undefined;

export function flowhintVersion(): string {
  if (typeof FLOWHINT_BUNDLED_VERSION === 'string') return FLOWHINT_BUNDLED_VERSION;
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

/**
 * `flowhint_build_info{version,nodejs_version}` = 1, as Prometheus' own `*_build_info` metrics
 * (`goversion` there). Never a label named `node`: on the agent's series that name means the
 * Kubernetes node, as in every per-node exporter.
 */
export function registerBuildInfo(registry: Registry): void {
  const info = new Gauge({
    name: 'flowhint_build_info',
    help: 'flowhint build information: always 1, with the version and the Node.js version as labels.',
    labelNames: ['version', 'nodejs_version'],
    registers: [registry],
  });
  info.set({ version: flowhintVersion(), nodejs_version: process.version }, 1);
}

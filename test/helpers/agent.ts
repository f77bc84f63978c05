/** Helpers for agent tests: Service objects that the api/ reader accepts, as entries. */
import { readFileSync, writeFileSync } from 'node:fs';
import { readHint } from '../../api/index.ts';
import { serviceEntry, type ServiceEntry } from '../../agent/state/desired.ts';

export interface SvcSpec {
  name: string;
  namespace?: string;
  clusterIPs?: string[];
  externalIPs?: string[];
  lbIPs?: string[];
  ports?: Array<{ port: number; protocol?: string; nodePort?: number }>;
  threshold?: string;
  type?: string;
  /** The hint (default LongLived), and ShortLived's conntrack-timeout. */
  hint?: string;
  timeout?: string;
}

/** An admitted (defaulted) hinted Service object. */
export function svc(s: SvcSpec): Record<string, unknown> {
  const hint = s.hint ?? 'LongLived';
  const annotations: Record<string, string> = { 'flowhint.dev/traffic-hint': hint };
  if (s.threshold !== undefined) annotations['flowhint.dev/offload-after-packets'] = s.threshold;
  if (s.timeout !== undefined) annotations['flowhint.dev/conntrack-timeout'] = s.timeout;
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: {
      name: s.name,
      namespace: s.namespace ?? 'default',
      annotations,
      labels: { 'flowhint.dev/traffic-hint': hint },
      resourceVersion: '1',
    },
    spec: {
      type: s.type ?? 'ClusterIP',
      clusterIP: s.clusterIPs?.[0] ?? '10.96.0.10',
      clusterIPs: s.clusterIPs ?? ['10.96.0.10'],
      ...(s.externalIPs ? { externalIPs: s.externalIPs } : {}),
      ports: s.ports ?? [{ port: 80, protocol: 'TCP' }],
    },
    status: { loadBalancer: s.lbIPs ? { ingress: s.lbIPs.map((ip) => ({ ip })) } : {} },
  };
}

export function entry(s: SvcSpec | Record<string, unknown>, defaultThreshold = 20): ServiceEntry {
  const obj = 'kind' in s ? s : svc(s as SvcSpec);
  const r = readHint(obj);
  if (!r.usable) throw new Error(`fixture not usable: ${r.reason}`);
  return serviceEntry(r.hint, defaultThreshold);
}

/** Compare with a golden file; UPDATE_GOLDEN=1 rewrites it. */
export function golden(name: string, actual: string): string {
  const url = new URL(`../fixtures/golden/${name}`, import.meta.url);
  if (process.env.UPDATE_GOLDEN === '1') writeFileSync(url, actual);
  return readFileSync(url, 'utf8');
}

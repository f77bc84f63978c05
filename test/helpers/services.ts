/**
 * Service fixtures for tests, built from the upstream round-trip fixture that sets every
 * field of core/v1 Service (test/fixtures/kubernetes-api/, provenance in its README).
 */
import { readFileSync } from 'node:fs';

const here = new URL('../fixtures/kubernetes-api/', import.meta.url);

export function upstreamFixture(name: string): Record<string, any> {
  return JSON.parse(readFileSync(new URL(name, here), 'utf8'));
}

/** The upstream Service verbatim: every field set, placeholder values ("protocolValue"). */
export function placeholderService(): Record<string, any> {
  return upstreamFixture('core.v1.Service.json');
}

export interface ServiceOptions {
  name?: string;
  namespace?: string;
  annotations?: Record<string, string> | undefined;
  labels?: Record<string, string> | undefined;
  type?: string;
  clusterIP?: string;
  clusterIPs?: string[];
  ports?: Array<Record<string, unknown>>;
}

/**
 * A complete, valid Service: every field of the upstream fixture, with real values.
 * `annotations`/`labels` set to `undefined` remove the map entirely.
 */
export function completeService(o: ServiceOptions = {}): Record<string, any> {
  const s = placeholderService();
  s.metadata.name = o.name ?? 'web';
  s.metadata.namespace = o.namespace ?? 'shop';
  delete s.metadata.generateName;
  delete s.metadata.deletionTimestamp;
  delete s.metadata.deletionGracePeriodSeconds;
  s.metadata.uid = '5f0c6a3e-1b7e-4c55-9a53-0d7f9c1f7a10';
  s.metadata.resourceVersion = '12345';
  s.metadata.labels = { app: 'web' };
  s.metadata.annotations = { 'example.com/owner': 'team-a' };
  if ('annotations' in o) {
    if (o.annotations === undefined) delete s.metadata.annotations;
    else s.metadata.annotations = o.annotations;
  }
  if ('labels' in o) {
    if (o.labels === undefined) delete s.metadata.labels;
    else s.metadata.labels = o.labels;
  }
  s.spec.type = o.type ?? 'LoadBalancer';
  s.spec.clusterIP = o.clusterIP ?? '10.96.0.10';
  s.spec.clusterIPs = o.clusterIPs ?? [s.spec.clusterIP];
  s.spec.ipFamilies = ['IPv4'];
  s.spec.ipFamilyPolicy = 'SingleStack';
  s.spec.externalIPs = ['192.0.2.10'];
  s.spec.ports = o.ports ?? [
    { name: 'http', protocol: 'TCP', appProtocol: 'http', port: 80, targetPort: 8080, nodePort: 30080 },
  ];
  s.spec.sessionAffinity = 'None';
  s.spec.loadBalancerIP = '';
  s.spec.loadBalancerSourceRanges = ['0.0.0.0/0'];
  delete s.spec.externalName;
  s.spec.externalTrafficPolicy = 'Cluster';
  s.spec.healthCheckNodePort = 0;
  s.spec.internalTrafficPolicy = 'Cluster';
  s.spec.trafficDistribution = 'PreferClose';
  s.spec.loadBalancerClass = 'example.com/lb';
  s.status.loadBalancer.ingress = [{ ip: '198.51.100.7', ipMode: 'VIP', ports: [{ port: 80, protocol: 'TCP' }] }];
  s.status.conditions[0].status = 'True';
  return s;
}

export const HINT = 'flowhint.dev/traffic-hint';
export const THRESHOLD = 'flowhint.dev/offload-after-packets';
export const TIMEOUT = 'flowhint.dev/conntrack-timeout';

export function hinted(
  value = 'LongLived',
  more: Record<string, string> = {},
  label: string | null = value,
): Record<string, any> {
  return completeService({
    annotations: { 'example.com/owner': 'team-a', [HINT]: value, ...more },
    labels: label === null ? { app: 'web' } : { app: 'web', [HINT]: label },
  });
}

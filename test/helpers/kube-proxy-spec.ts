/**
 * The cluster kube-proxy.ts and kube-proxy-iptables.ts render rulesets for: Services with
 * ports and endpoints, plus generated filler Services; chain-name hashes; small shared helpers.
 */
import { createHash } from 'node:crypto';
import { z } from 'zod';

const Ipv4 = z.ipv4();
const Port = z.object({
  name: z.string().regex(/^[a-z0-9-]*$/),
  protocol: z.enum(['TCP', 'UDP']),
  port: z.number().int().min(1).max(65535),
  targetPort: z.number().int().min(1).max(65535),
  nodePort: z.number().int().min(1).max(65535).optional(),
});
const Service = z.object({
  namespace: z.string().regex(/^[a-z0-9-]+$/),
  name: z.string().regex(/^[a-z0-9-]+$/),
  clusterIP: Ipv4,
  loadBalancerIPs: z.array(Ipv4).default([]),
  ports: z.array(Port).min(1),
  /** Ready endpoint addresses (Pod IPs); empty: the Service has no endpoints. */
  endpoints: z.array(Ipv4),
});
export const ClusterSpec = z
  .object({
    podCIDR: z.string().regex(/^[0-9.]+\/[0-9]+$/),
    serviceCIDR: z.string().regex(/^[0-9.]+\/[0-9]+$/),
    /** Addresses that accept NodePort traffic (kube-proxy's `nodeport-ips`). */
    nodeIPs: z.array(Ipv4).min(1),
    services: z.array(Service),
    /**
     * This many more ClusterIP Services, two endpoints each, as a cluster's load: addresses
     * 10.100.x.y (inside the Service CIDR), endpoints in `fillerEndpointPrefix`.0/24.
     */
    filler: z.number().int().min(0).max(20_000).default(0),
    fillerEndpointPrefix: z
      .string()
      .regex(/^[0-9]+\.[0-9]+\.[0-9]+$/)
      .default('10.0.9'),
  })
  .superRefine((spec, ctx) => {
    // The API server allocates each NodePort once; a duplicate would fail the whole transaction.
    const seen = new Set<string>();
    for (const s of spec.services) {
      for (const p of s.ports) {
        if (p.nodePort === undefined) continue;
        const k = `${p.protocol}/${p.nodePort}`;
        if (seen.has(k))
          ctx.addIssue({
            code: 'custom',
            message: `NodePort ${k} is used twice (${s.namespace}/${s.name})`,
            path: ['services'],
          });
        seen.add(k);
      }
    }
  });
export type ClusterSpec = z.input<typeof ClusterSpec>;
export type Spec = z.output<typeof ClusterSpec>;
export type Svc = z.output<typeof Service>;
export type SvcPort = z.output<typeof Port>;

/** base32 (RFC 4648, no padding) of SHA-256, first `n` characters, as kube-proxy's names. */
export function hashName(input: string, n: number): string {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';
  const bytes = createHash('sha256').update(input).digest();
  let bits = 0;
  let value = 0;
  let out = '';
  for (const byte of bytes) {
    value = (value << 8) | byte;
    bits += 8;
    while (bits >= 5 && out.length < n) {
      out += alphabet.charAt((value >>> (bits - 5)) & 31);
      bits -= 5;
    }
  }
  return out;
}

export function withFiller(spec: Spec): Svc[] {
  const filler: Svc[] = [];
  for (let i = 0; i < spec.filler; i++) {
    const a = spec.fillerEndpointPrefix;
    filler.push({
      namespace: 'load',
      name: `svc-${i}`,
      clusterIP: `10.100.${i >> 8}.${i & 255}`,
      loadBalancerIPs: [],
      ports: [{ name: 'http', protocol: 'TCP', port: 80, targetPort: 8080 }],
      endpoints: [`${a}.${(i % 250) + 1}`, `${a}.${((i + 1) % 250) + 1}`],
    });
  }
  return [...spec.services, ...filler];
}

export const proto = (p: SvcPort) => p.protocol.toLowerCase();
/** kube-proxy's ServicePortName string: `ns/name:port`. */
export const portName = (s: Svc, p: SvcPort) => `${s.namespace}/${s.name}:${p.name}`;
export const external = (p: SvcPort, s: Svc) => p.nodePort !== undefined || s.loadBalancerIPs.length > 0;

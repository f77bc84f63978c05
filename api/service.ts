/**
 * zod schemas for the parts of a core/v1 Service that flowhint reads.
 *
 * Every object schema is loose (`z.looseObject`): fields flowhint does not own pass through
 * untouched, including ones added to the API after this code was written. Kubernetes may
 * send `null` for an empty map or list, so optional fields are `nullish`.
 */
import { z } from 'zod';

export const StringMap = z.record(z.string(), z.string());
export type StringMap = z.infer<typeof StringMap>;

/**
 * Just the maps defaulting touches. Used where the rest of the object may be anything.
 * Not loose: the parsed copy holds only these two maps (defaulting patches the raw object),
 * so zod does not copy every other field of a Service on each admission request.
 */
export const HintMetadata = z.object({
  metadata: z.object({
    annotations: StringMap.nullish(),
    labels: StringMap.nullish(),
  }),
});
export type HintMetadata = z.infer<typeof HintMetadata>;

export const ServicePort = z.looseObject({
  name: z.string().nullish(),
  protocol: z.string().nullish(),
  port: z.number().int(),
  nodePort: z.number().int().nullish(),
});
export type ServicePort = z.infer<typeof ServicePort>;

export const LoadBalancerIngress = z.looseObject({
  ip: z.string().nullish(),
  hostname: z.string().nullish(),
});

export const Service = z.looseObject({
  apiVersion: z.string().nullish(),
  kind: z.string().nullish(),
  metadata: z.looseObject({
    name: z.string().nullish(),
    generateName: z.string().nullish(),
    namespace: z.string().nullish(),
    uid: z.string().nullish(),
    resourceVersion: z.string().nullish(),
    annotations: StringMap.nullish(),
    labels: StringMap.nullish(),
  }),
  spec: z
    .looseObject({
      type: z.string().nullish(),
      clusterIP: z.string().nullish(),
      clusterIPs: z.array(z.string()).nullish(),
      externalIPs: z.array(z.string()).nullish(),
      ports: z.array(ServicePort).nullish(),
    })
    .nullish(),
  status: z
    .looseObject({
      loadBalancer: z.looseObject({ ingress: z.array(LoadBalancerIngress).nullish() }).nullish(),
    })
    .nullish(),
});
export type Service = z.infer<typeof Service>;

/** Protocol as the API defaults it: absent means TCP. */
export function portProtocol(port: ServicePort): string {
  return port.protocol ?? 'TCP';
}

/** Offloadable L4 protocols. Flowtables handle TCP and UDP only. */
export const OFFLOADABLE_PROTOCOLS = ['TCP', 'UDP'] as const;
export type OffloadableProtocol = (typeof OFFLOADABLE_PROTOCOLS)[number];

export function isOffloadable(protocol: string): protocol is OffloadableProtocol {
  return (OFFLOADABLE_PROTOCOLS as readonly string[]).includes(protocol);
}

/** zod's first issue as `path: message` parts (`<root>` for the whole value). */
export function firstIssue(error: z.ZodError): { path: string; message: string } {
  const issue = error.issues[0];
  return { path: issue?.path.join('.') || '<root>', message: issue?.message ?? 'invalid' };
}

/** `namespace/name` for logs and messages; never rendered into nft text. */
export function serviceKey(meta: {
  namespace?: string | null;
  name?: string | null;
  generateName?: string | null;
}): string {
  const name = meta.name ?? (meta.generateName ? `${meta.generateName}*` : '<unnamed>');
  return `${meta.namespace || 'default'}/${name}`;
}

/** Render a user-given value for a message: quoted, control characters escaped, bounded. */
export function quoteValue(value: string, max = 40): string {
  const shown = value.length > max ? `${value.slice(0, max)}…` : value;
  return JSON.stringify(shown).replace(
    /[\u007f-\u009f\u2028\u2029]/g,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
}

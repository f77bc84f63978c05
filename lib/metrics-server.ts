/**
 * The plain-HTTP metrics (and probe) endpoint shared by webhook and agent. It is a separate
 * listener from the webhook's HTTPS port, so scraping never competes with admission and
 * needs no client certificate.
 */
import Fastify, { type FastifyInstance } from 'fastify';
import type { Registry } from 'prom-client';
import { FlowhintError, errorMessage } from './errors.ts';

/** A listen failure as the catalogue's FH_LISTEN_FAILED, naming the address and the flag to change. */
export function listenError(err: unknown, host: string, port: number, flag: string): FlowhintError {
  const code = (err as { code?: unknown } | null)?.code;
  const why = code === 'EADDRINUSE' ? 'the port is in use' : code === 'EACCES' ? 'not allowed' : errorMessage(err);
  return new FlowhintError(
    'FH_LISTEN_FAILED',
    `cannot listen on ${host}:${port}: ${why}; pass a free port with ${flag}`,
  );
}

export interface ProbeServerOptions {
  registry: Registry;
  host: string;
  port: number;
  /** Extra probe routes, e.g. the agent's /healthz and /readyz. */
  probes?: Record<string, () => { ok: boolean; detail?: unknown }>;
}

export async function startMetricsServer(o: ProbeServerOptions): Promise<FastifyInstance> {
  const app = Fastify({ logger: false });
  app.get('/metrics', async (_req, reply) => {
    reply.header('content-type', o.registry.contentType);
    return o.registry.metrics();
  });
  for (const [path, probe] of Object.entries(o.probes ?? {})) {
    app.get(path, async (_req, reply) => {
      const r = probe();
      reply.code(r.ok ? 200 : 503);
      return { ok: r.ok, ...(r.detail === undefined ? {} : { detail: r.detail }) };
    });
  }
  try {
    await app.listen({ host: o.host, port: o.port });
  } catch (err) {
    await app.close();
    throw listenError(err, o.host, o.port, '--metrics-port');
  }
  return app;
}

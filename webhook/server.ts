/**
 * The webhook process: HTTPS admission server with certificate rotation, plus the plain-HTTP
 * metrics listener. `flowhint webhook` and `npm start` both call startWebhook.
 */
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { buildApp } from './app.ts';
import { createWebhookMetrics } from './metrics.ts';
import { CertReloader, certificateExpiry, loadTlsMaterial } from './tls.ts';
import { listenError, startMetricsServer } from '../lib/metrics-server.ts';
import { flowhintVersion } from '../lib/version.ts';

export interface WebhookServerOptions {
  certFile: string;
  keyFile: string;
  host: string;
  port: number;
  /** 0 picks a free port; `undefined` starts no metrics listener. */
  metricsPort?: number;
  metricsHost?: string;
  logger: Logger;
  certPollMs?: number;
}

export interface RunningWebhook {
  app: FastifyInstance;
  url: string;
  metricsUrl: string | undefined;
  reloader: CertReloader;
  close(): Promise<void>;
}

function address(app: FastifyInstance, scheme: string): string {
  const a = app.server.address();
  if (a === null || typeof a === 'string') throw new Error('server is not listening on TCP');
  const host = a.family === 'IPv6' ? `[${a.address}]` : a.address;
  return `${scheme}://${host}:${a.port}`;
}

export async function startWebhook(o: WebhookServerOptions): Promise<RunningWebhook> {
  const material = await loadTlsMaterial(o.certFile, o.keyFile);
  const metrics = createWebhookMetrics();
  let ready = false;
  const app = buildApp({ tls: material, logger: o.logger, metrics, isReady: () => ready });
  // eslint-disable-next-line @typescript-eslint/no-unsafe-class-instance-assignment -- buildApp serves HTTPS when given TLS material; fastify's type says http.Server.
  const https = app.server as import('node:https').Server;
  const reloader = new CertReloader({
    certFile: o.certFile,
    keyFile: o.keyFile,
    logger: o.logger,
    ...(o.certPollMs === undefined ? {} : { pollMs: o.certPollMs }),
    apply: (m) => {
      https.setSecureContext({ cert: m.cert, key: m.key, minVersion: 'TLSv1.2' });
      metrics.certificateExpiry.set(certificateExpiry(m.cert));
    },
    onResult: (result) => metrics.certReloads.inc({ result }),
  });
  reloader.seed(material);
  metrics.certificateExpiry.set(certificateExpiry(material.cert));
  // The metrics port first: a port in use fails the start before HTTPS serves anything.
  const metricsApp =
    o.metricsPort === undefined
      ? undefined
      : await startMetricsServer({ registry: metrics.registry, host: o.metricsHost ?? o.host, port: o.metricsPort });
  try {
    await app.listen({ host: o.host, port: o.port });
  } catch (err) {
    await Promise.all([app.close(), metricsApp?.close()]);
    throw listenError(err, o.host, o.port, '--port');
  }
  ready = true;
  reloader.start();
  const url = address(app, 'https');
  const metricsUrl = metricsApp ? `${address(metricsApp, 'http')}/metrics` : null;
  o.logger.info({ version: flowhintVersion(), url, metrics: metricsUrl }, 'webhook listening');
  return {
    app,
    url,
    metricsUrl: metricsApp ? address(metricsApp, 'http') : undefined,
    reloader,
    async close() {
      ready = false;
      reloader.stop();
      await Promise.all([app.close(), metricsApp?.close()]);
    },
  };
}

/** `flowhint webhook --cert FILE --key FILE [--port 8443] [--metrics-port 8080] [--host 0.0.0.0]` */
import { z } from 'zod';
import { intFlag, parseFlags, portFlag } from '../lib/cli.ts';
import { createLogger } from '../lib/log.ts';
import { stopSignals } from '../lib/process.ts';
import { startWebhook } from './server.ts';

const USAGE =
  'usage: flowhint webhook --cert FILE --key FILE [--port 8443] [--metrics-port 8080] [--host 0.0.0.0] [--cert-poll-seconds 10]';

const Flags = z.object({
  cert: z.string().min(1),
  key: z.string().min(1),
  port: portFlag(8443),
  'metrics-port': portFlag(8080),
  host: z.string().default('0.0.0.0'),
  'cert-poll-seconds': intFlag(1, 3600, 10),
});

export async function webhookCommand(argv: string[]): Promise<number> {
  const f = parseFlags(
    argv,
    {
      cert: { type: 'string', value: 'FILE', help: 'serving certificate (PEM); reloaded when it changes' },
      key: { type: 'string', value: 'FILE', help: 'its private key (PEM)' },
      port: {
        type: 'string',
        value: 'PORT',
        help: 'HTTPS port of /mutate, /validate, /healthz and /readyz',
        default: '8443',
      },
      'metrics-port': { type: 'string', value: 'PORT', help: 'plain-HTTP port of /metrics', default: '8080' },
      host: { type: 'string', value: 'ADDR', help: 'address both ports listen on', default: '0.0.0.0' },
      'cert-poll-seconds': {
        type: 'string',
        value: 'SECONDS',
        help: 'how often the certificate files are checked besides watching them',
        default: '10',
      },
    },
    Flags,
    USAGE,
  );
  const logger = createLogger('flowhint-webhook');
  const server = await startWebhook({
    certFile: f.cert,
    keyFile: f.key,
    host: f.host,
    port: f.port,
    metricsPort: f['metrics-port'],
    logger,
    certPollMs: f['cert-poll-seconds'] * 1000,
  });
  const signals = stopSignals();
  logger.info({ signal: await signals.signal }, 'shutting down');
  signals.off();
  await server.close();
  return 0;
}

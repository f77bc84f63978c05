/** `flowhint webhook --cert FILE --key FILE [--port 8443] [--metrics-port 8080] [--host 0.0.0.0]` */
import { z } from 'zod';
import { parseFlags, portFlag } from '../lib/cli.ts';
import { createLogger } from '../lib/log.ts';
import { startWebhook } from './server.ts';

const USAGE =
  'usage: flowhint webhook --cert FILE --key FILE [--port 8443] [--metrics-port 8080] [--host 0.0.0.0] [--cert-poll-seconds 10]';

const Flags = z.object({
  cert: z.string().min(1),
  key: z.string().min(1),
  port: portFlag(8443),
  'metrics-port': portFlag(8080),
  host: z.string().default('0.0.0.0'),
  'cert-poll-seconds': z.coerce.number().positive().default(10),
});

export async function webhookCommand(argv: string[]): Promise<number> {
  const f = parseFlags(
    argv,
    {
      cert: { type: 'string' },
      key: { type: 'string' },
      port: { type: 'string' },
      'metrics-port': { type: 'string' },
      host: { type: 'string' },
      'cert-poll-seconds': { type: 'string' },
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
  await new Promise<void>((resolve) => {
    const stop = (signal: string) => {
      logger.info({ signal }, 'shutting down');
      resolve();
    };
    process.once('SIGTERM', stop);
    process.once('SIGINT', stop);
  });
  await server.close();
  return 0;
}

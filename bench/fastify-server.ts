/**
 * The webhook benchmark's framework floor: a minimal fastify route on the webhook's TLS
 * settings that parses the JSON body (fastify's own parser) and answers the same canned
 * AdmissionReview as bench/bare-server.ts. No logging, no metrics, no decisions.
 * usage: node bench/fastify-server.ts CERT KEY  (prints its port on stdout)
 */
import { readFileSync } from 'node:fs';
import Fastify from 'fastify';
import { CANNED_REVIEW } from './bare-server.ts';

const [certFile, keyFile] = process.argv.slice(2);
if (!certFile || !keyFile) throw new Error('usage: fastify-server.ts CERT KEY');
const app = Fastify({
  keepAliveTimeout: 30_000,
  https: {
    cert: readFileSync(certFile),
    key: readFileSync(keyFile),
    minVersion: 'TLSv1.2',
    handshakeTimeout: 5_000,
    headersTimeout: 5_000,
    connectionsCheckingInterval: 1_000,
  },
});
app.post('/mutate', async () => CANNED_REVIEW);
await app.listen({ host: '127.0.0.1', port: 0 });
const a = app.server.address();
process.stdout.write(`${typeof a === 'object' && a ? a.port : 0}\n`);
process.on('SIGTERM', () => void app.close().then(() => process.exit(0)));

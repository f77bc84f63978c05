/**
 * The webhook benchmark's baseline: a bare node:https server that reads the request body and
 * answers a canned AdmissionReview. Same certificate, same TLS settings, no framework.
 * usage: node bench/bare-server.ts CERT KEY  (prints its port on stdout)
 */
import { readFileSync } from 'node:fs';
import { createServer } from 'node:https';

/** The answer both baselines give: the shape of the webhook's, without the work. */
export const CANNED_REVIEW = {
  apiVersion: 'admission.k8s.io/v1',
  kind: 'AdmissionReview',
  response: { uid: '705ab4f5-6393-11e8-b7cc-42010a800002', allowed: true, patchType: 'JSONPatch', patch: 'W10=' },
};

function serve(certFile: string, keyFile: string): void {
  const canned = JSON.stringify(CANNED_REVIEW);
  const server = createServer(
    { cert: readFileSync(certFile), key: readFileSync(keyFile), minVersion: 'TLSv1.2' },
    (req, res) => {
      req.on('data', () => {});
      req.on('end', () => {
        res.writeHead(200, {
          'content-type': 'application/json; charset=utf-8',
          'content-length': Buffer.byteLength(canned),
        });
        res.end(canned);
      });
    },
  );
  server.keepAliveTimeout = 30_000;
  server.listen(0, '127.0.0.1', () => {
    const a = server.address();
    process.stdout.write(`${typeof a === 'object' && a ? a.port : 0}\n`);
  });
  process.on('SIGTERM', () => server.close(() => process.exit(0)));
}

if (import.meta.main) {
  const [certFile, keyFile] = process.argv.slice(2);
  if (!certFile || !keyFile) throw new Error('usage: bare-server.ts CERT KEY');
  serve(certFile, keyFile);
}

/**
 * AdmissionReview requests as the API server sends them, built on the upstream fixture
 * (every request field set), and an HTTPS client that pins the test CA.
 */
import { request as httpsRequest, Agent } from 'node:https';
import { rmSync } from 'node:fs';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { TLSSocket } from 'node:tls';
import { generateCerts, writeBundle, type CertBundle } from '../../certs/generate.ts';
import { upstreamFixture } from './services.ts';

export interface ReviewOptions {
  operation?: 'CREATE' | 'UPDATE' | 'DELETE' | 'CONNECT';
  object?: unknown;
  oldObject?: unknown;
  dryRun?: boolean;
  uid?: string;
  kind?: { group: string; version: string; kind: string };
  subResource?: string;
}

export function review(o: ReviewOptions): Record<string, any> {
  const r = upstreamFixture('admission.k8s.io.v1.AdmissionReview.json');
  delete r.response;
  const req = r.request;
  const obj = o.object as { metadata?: { name?: string; namespace?: string } } | undefined;
  req.uid = o.uid ?? '705ab4f5-6393-11e8-b7cc-42010a800002';
  req.kind = o.kind ?? { group: '', version: 'v1', kind: 'Service' };
  req.resource = { group: '', version: 'v1', resource: 'services' };
  req.requestKind = req.kind;
  req.requestResource = req.resource;
  if (o.subResource) req.subResource = o.subResource;
  else delete req.subResource;
  delete req.requestSubResource;
  req.name = obj?.metadata?.name ?? 'web';
  req.namespace = obj?.metadata?.namespace ?? 'shop';
  req.operation = o.operation ?? 'CREATE';
  req.userInfo = { username: 'alice', uid: '1', groups: ['system:authenticated'] };
  req.object = o.object ?? null;
  req.oldObject = o.oldObject ?? null;
  req.dryRun = o.dryRun ?? false;
  req.options = { apiVersion: 'meta.k8s.io/v1', kind: o.operation === 'UPDATE' ? 'UpdateOptions' : 'CreateOptions' };
  return r;
}

export async function tempCerts(
  dnsNames = ['localhost'],
  ipAddresses = ['127.0.0.1'],
): Promise<{ dir: string; bundle: CertBundle }> {
  const dir = await mkdtemp(join(tmpdir(), 'flowhint-certs-'));
  process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
  const bundle = await generateCerts({ dnsNames, ipAddresses });
  await writeBundle(dir, bundle);
  return { dir, bundle };
}

export interface HttpResult {
  status: number;
  body: string;
  json: any;
  /** SHA-256 fingerprint of the certificate the server presented. */
  peerFingerprint: string | undefined;
}

export function post(
  url: string,
  path: string,
  body: string | Buffer,
  o: { ca: string | string[]; agent?: Agent; contentType?: string; method?: string },
): Promise<HttpResult> {
  return new Promise((resolve, reject) => {
    const u = new URL(path, url);
    const req = httpsRequest(
      u,
      {
        method: o.method ?? 'POST',
        ca: o.ca,
        agent: o.agent ?? false,
        headers: { 'content-type': o.contentType ?? 'application/json', 'content-length': Buffer.byteLength(body) },
      },
      (res) => {
        const socket = res.socket;
        const peerFingerprint = socket instanceof TLSSocket ? socket.getPeerCertificate().fingerprint256 : undefined;
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let json: unknown;
          try {
            json = JSON.parse(text);
          } catch {
            json = undefined;
          }
          resolve({ status: res.statusCode ?? 0, body: text, json, peerFingerprint });
        });
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

export function decodePatch(response: { patch?: string }): unknown[] {
  return response.patch ? JSON.parse(Buffer.from(response.patch, 'base64').toString('utf8')) : [];
}

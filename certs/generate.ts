/**
 * Dev and self-managed certificates: a CA and a webhook serving certificate signed by it,
 * generated with @peculiar/x509 on WebCrypto (ECDSA P-256, SHA-256).
 *
 * The serving certificate's SANs are the webhook Service's DNS names (the API server checks
 * them); IP SANs are accepted too, for the local 127.0.0.1 flow. The CA certificate is the
 * webhook configurations' `caBundle`.
 */
import { FlowhintError } from '../lib/errors.ts';
import { webcrypto } from 'node:crypto';
import { isIP } from 'node:net';
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
// @peculiar/x509 resolves its ASN.1 helpers through tsyringe, which needs this polyfill first.
import 'reflect-metadata';
import * as x509 from '@peculiar/x509';

x509.cryptoProvider.set(webcrypto as unknown as Crypto);

const ALG = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' } as const;
const DAY = 86_400_000;

export interface CertBundle {
  caCert: string;
  caKey: string;
  cert: string;
  key: string;
  /** base64 of the CA certificate PEM: the webhook configurations' `caBundle`. */
  caBundle: string;
}

export interface GenerateOptions {
  dnsNames: string[];
  ipAddresses?: string[];
  days?: number;
  /** Sign with this CA instead of making a new one (rotation keeps the caBundle). */
  ca?: { cert: string; key: string };
  now?: Date;
}

async function exportKey(key: CryptoKey): Promise<string> {
  const der = await webcrypto.subtle.exportKey('pkcs8', key);
  return x509.PemConverter.encode(der, 'PRIVATE KEY');
}

async function importKey(pem: string): Promise<CryptoKey> {
  const der = x509.PemConverter.decode(pem)[0];
  if (!der) throw new Error('no PEM block in CA key');
  return (await webcrypto.subtle.importKey('pkcs8', der, ALG, true, ['sign'])) as unknown as CryptoKey;
}

async function newKeys(): Promise<CryptoKeyPair> {
  return (await webcrypto.subtle.generateKey(ALG, true, ['sign', 'verify'])) as unknown as CryptoKeyPair;
}

async function makeCa(now: Date, days: number): Promise<{ cert: x509.X509Certificate; key: CryptoKey }> {
  const keys = await newKeys();
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    name: 'CN=flowhint webhook CA',
    notBefore: new Date(now.getTime() - 60_000),
    notAfter: new Date(now.getTime() + days * DAY),
    keys,
    signingAlgorithm: ALG,
    extensions: [
      new x509.BasicConstraintsExtension(true, 0, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
    ],
  });
  return { cert, key: keys.privateKey };
}

/** An RFC 1123 DNS name, as a certificate's subjectAltName holds one (a leading `*.` allowed). */
export function isDnsName(name: string): boolean {
  const label = '[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?';
  return name.length <= 253 && new RegExp(`^(\\*\\.)?${label}(\\.${label})*$`).test(name);
}

export async function generateCerts(o: GenerateOptions): Promise<CertBundle> {
  if (o.dnsNames.length === 0 && (o.ipAddresses ?? []).length === 0)
    throw new FlowhintError('FH_USAGE', 'at least one --dns-name (or --service, or --ip) is needed');
  const now = o.now ?? new Date();
  const days = o.days ?? 365;
  const ca = o.ca
    ? { cert: new x509.X509Certificate(o.ca.cert), key: await importKey(o.ca.key) }
    : await makeCa(now, days * 5);
  const keys = await newKeys();
  const names: x509.JsonGeneralName[] = [
    ...o.dnsNames.map((value) => {
      if (!isDnsName(value)) {
        throw new FlowhintError(
          'FH_USAGE',
          `--dns-name: ${JSON.stringify(value)} is not a DNS name (lower-case letters, digits, '-' and '.', e.g. flowhint-webhook.flowhint-system.svc)`,
        );
      }
      return { type: 'dns' as const, value };
    }),
    ...(o.ipAddresses ?? []).map((value) => {
      if (isIP(value) === 0) throw new FlowhintError('FH_USAGE', `--ip: not an IP address: ${JSON.stringify(value)}`);
      return { type: 'ip' as const, value };
    }),
  ];
  const cert = await x509.X509CertificateGenerator.create({
    subject: `CN=${o.dnsNames[0] ?? o.ipAddresses?.[0] ?? 'flowhint-webhook'}`,
    issuer: ca.cert.subject,
    notBefore: new Date(now.getTime() - 60_000),
    notAfter: new Date(now.getTime() + days * DAY),
    publicKey: keys.publicKey,
    signingKey: ca.key,
    signingAlgorithm: ALG,
    extensions: [
      new x509.BasicConstraintsExtension(false, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature | x509.KeyUsageFlags.keyEncipherment, true),
      new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth]),
      new x509.SubjectAlternativeNameExtension(names),
      await x509.AuthorityKeyIdentifierExtension.create(ca.cert.publicKey),
    ],
  });
  const caCert = ca.cert.toString('pem');
  return {
    caCert,
    caKey: await exportKey(ca.key),
    cert: cert.toString('pem'),
    key: await exportKey(keys.privateKey),
    caBundle: Buffer.from(caCert).toString('base64'),
  };
}

/** The webhook Service's DNS names, as the API server may address it. */
export function serviceDnsNames(service: string, namespace: string): string[] {
  return [
    service,
    `${service}.${namespace}`,
    `${service}.${namespace}.svc`,
    `${service}.${namespace}.svc.cluster.local`,
  ];
}

export const FILES = { caCert: 'ca.crt', caKey: 'ca.key', cert: 'tls.crt', key: 'tls.key' } as const;

/**
 * Write a bundle in the layout of a kubernetes.io/tls Secret (tls.crt, tls.key, ca.crt).
 * Each file is written beside and renamed into place, so a reader never sees half a file.
 */
export async function writeBundle(dir: string, b: CertBundle): Promise<void> {
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const write = async (name: string, data: string, mode: number) => {
    const tmp = join(dir, `.${name}.tmp`);
    await writeFile(tmp, data, { mode });
    await rename(tmp, join(dir, name));
  };
  await write(FILES.caCert, b.caCert, 0o644);
  await write(FILES.caKey, b.caKey, 0o600);
  await write(FILES.key, b.key, 0o600);
  await write(FILES.cert, b.cert, 0o644);
}

export async function readCa(dir: string): Promise<{ cert: string; key: string } | undefined> {
  try {
    return {
      cert: await readFile(join(dir, FILES.caCert), 'utf8'),
      key: await readFile(join(dir, FILES.caKey), 'utf8'),
    };
  } catch {
    return undefined;
  }
}

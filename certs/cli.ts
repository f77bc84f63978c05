/** `flowhint certs`: a CA and a serving certificate for the webhook; never replaces a CA without --force. */
import { z } from 'zod';
import { existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { intFlag, parseFlags } from '../lib/cli.ts';
import { FlowhintError, errorMessage } from '../lib/errors.ts';
import { FILES, generateCerts, readCa, serviceDnsNames, writeBundle } from './generate.ts';

const USAGE = `usage: flowhint certs --out DIR (--dns-name NAME… | --service NAME --namespace NS) [--ip ADDR…] [--days 365] [--reuse-ca | --force]
  Writes ca.crt, ca.key, tls.crt, tls.key into DIR and prints the base64 caBundle. A CA already in DIR is
  kept with --reuse-ca (the caBundle stays), replaced only with --force.`;

const Flags = z.object({
  out: z.string().min(1),
  'dns-name': z.array(z.string().min(1)).default([]),
  ip: z.array(z.string().min(1)).default([]),
  service: z.string().optional(),
  namespace: z.string().default('flowhint-system'),
  days: intFlag(1, 3650, 365),
  'reuse-ca': z.boolean().default(false),
  force: z.boolean().default(false),
});

export async function certsCommand(argv: string[]): Promise<number> {
  const f = parseFlags(
    argv,
    {
      out: { type: 'string', value: 'DIR', help: 'directory for ca.crt, ca.key, tls.crt and tls.key' },
      'dns-name': {
        type: 'string',
        multiple: true,
        value: 'NAME',
        help: "a DNS name of the webhook's serving certificate",
      },
      ip: { type: 'string', multiple: true, value: 'ADDR', help: "an IP address of the webhook's serving certificate" },
      service: { type: 'string', value: 'NAME', help: "the webhook's Service: its in-cluster DNS names" },
      namespace: { type: 'string', value: 'NS', help: "the webhook Service's namespace", default: 'flowhint-system' },
      days: {
        type: 'string',
        value: 'N',
        help: 'validity of the serving certificate, in days (the CA: five times that)',
        default: '365',
      },
      'reuse-ca': { type: 'boolean', help: 'sign with the CA already in --out, so the caBundle stays' },
      force: { type: 'boolean', help: 'replace a CA already in --out' },
    },
    Flags,
    USAGE,
  );
  const dnsNames = [...f['dns-name'], ...(f.service ? serviceDnsNames(f.service, f.namespace) : [])];
  if (existsSync(f.out) && !statSync(f.out).isDirectory()) {
    throw new FlowhintError('FH_CERTS_IO', `--out ${f.out} is a file, not a directory; name a directory`);
  }
  if (!f['reuse-ca'] && !f.force && existsSync(join(f.out, FILES.caKey))) {
    throw new FlowhintError(
      'FH_CERTS_EXIST',
      `${f.out} already holds a CA (${FILES.caKey}); pass --reuse-ca to keep it (the caBundle stays) or --force to replace it`,
    );
  }
  const ca = f['reuse-ca'] ? await readCa(f.out) : undefined;
  if (f['reuse-ca'] && !ca)
    throw new FlowhintError('FH_CERTS_IO', `--reuse-ca: no readable CA (ca.crt, ca.key) in ${f.out}`);
  const bundle = await generateCerts({ dnsNames, ipAddresses: f.ip, days: f.days, ...(ca ? { ca } : {}) });
  await writeBundle(f.out, bundle).catch((err: unknown) => {
    throw new FlowhintError('FH_CERTS_IO', `cannot write into ${f.out}: ${errorMessage(err)}`);
  });
  process.stderr.write(
    `wrote ${f.out}/{ca.crt,ca.key,tls.crt,tls.key} for ${[...dnsNames, ...f.ip].join(', ')}${ca ? ' (existing CA kept)' : ''}\ncaBundle:\n`,
  );
  process.stdout.write(`${bundle.caBundle}\n`);
  return 0;
}

/** `flowhint certs --out DIR --dns-name NAME… [--ip ADDR…] [--days N] [--reuse-ca]` */
import { z } from 'zod';
import { parseFlags } from '../lib/cli.ts';
import { generateCerts, readCa, serviceDnsNames, writeBundle } from './generate.ts';

const USAGE = `usage: flowhint certs --out DIR (--dns-name NAME… | --service NAME --namespace NS) [--ip ADDR…] [--days 365] [--reuse-ca]
  Writes ca.crt, ca.key, tls.crt, tls.key into DIR and prints the base64 caBundle.`;

const Flags = z.object({
  out: z.string().min(1),
  'dns-name': z.array(z.string().min(1)).default([]),
  ip: z.array(z.string().min(1)).default([]),
  service: z.string().optional(),
  namespace: z.string().default('flowhint-system'),
  days: z.coerce.number().int().positive().max(3650).default(365),
  'reuse-ca': z.boolean().default(false),
});

export async function certsCommand(argv: string[]): Promise<number> {
  const f = parseFlags(
    argv,
    {
      out: { type: 'string' },
      'dns-name': { type: 'string', multiple: true },
      ip: { type: 'string', multiple: true },
      service: { type: 'string' },
      namespace: { type: 'string' },
      days: { type: 'string' },
      'reuse-ca': { type: 'boolean' },
    },
    Flags,
    USAGE,
  );
  const dnsNames = [...f['dns-name'], ...(f.service ? serviceDnsNames(f.service, f.namespace) : [])];
  const ca = f['reuse-ca'] ? await readCa(f.out) : undefined;
  const bundle = await generateCerts({ dnsNames, ipAddresses: f.ip, days: f.days, ...(ca ? { ca } : {}) });
  await writeBundle(f.out, bundle);
  process.stderr.write(
    `wrote ${f.out}/{ca.crt,ca.key,tls.crt,tls.key} for ${[...dnsNames, ...f.ip].join(', ')}${ca ? ' (existing CA kept)' : ''}\ncaBundle:\n`,
  );
  process.stdout.write(`${bundle.caBundle}\n`);
  return 0;
}

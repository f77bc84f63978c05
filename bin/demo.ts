/**
 * `npm start` (`flowhint demo`): the whole flow locally, on embedded defaults.
 *
 * 1. Dev certificates under certs/dev (made once), and the real webhook on 127.0.0.1.
 * 2. Every manifest in manifests/examples/ through it over HTTPS, as the API server would:
 *    mutate, apply the patch, validate. Each decision is printed.
 * 3. The real agent on the admitted Services: as root with nft, in a scratch network
 *    namespace `flowhint-demo` (created and removed here; never the host's ruleset), printing
 *    the programmed table and status; otherwise a dry run printing the ruleset it would apply.
 * It exits by itself, or on Ctrl-C, and leaves nothing behind but the dev certificates.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { Agent as HttpsAgent, request } from 'node:https';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import fjp from 'fast-json-patch';
import { loadAll } from 'js-yaml';
import { z } from 'zod';
import { readHint } from '../api/index.ts';
import { Agent } from '../agent/agent.ts';
import { buildDesired, serviceEntry } from '../agent/state/desired.ts';
import { createAgentMetrics } from '../agent/report/metrics.ts';
import { makeNft } from '../agent/nft/nft.ts';
import { renderFull } from '../agent/nft/render.ts';
import { FileSource } from '../agent/sources/files.ts';
import { formatStatus } from '../agent/report/status.ts';
import { generateCerts, writeBundle, FILES } from '../certs/generate.ts';
import { parseFlags } from '../lib/cli.ts';
import { makeRunner } from '../lib/exec.ts';
import { silentLogger } from '../lib/log.ts';
import { startWebhook } from '../webhook/server.ts';

/** The project's root: the nearest directory above this file with package.json (from bin/ or dist/bin/). */
function projectRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, 'package.json')) && dirname(dir) !== dir) dir = dirname(dir);
  return dir;
}
const ROOT = projectRoot();
const CERTS = join(ROOT, 'certs', 'dev');
const EXAMPLES = join(ROOT, 'manifests', 'examples');
const NETNS = 'flowhint-demo';

const say = (s = '') => process.stdout.write(`${s}\n`);

async function ensureCerts(): Promise<void> {
  if (existsSync(join(CERTS, FILES.cert)) && existsSync(join(CERTS, FILES.key))) return;
  await writeBundle(CERTS, await generateCerts({ dnsNames: ['localhost'], ipAddresses: ['127.0.0.1'] }));
  say(`dev certificates written to ${CERTS}`);
}

/** The part of an AdmissionReview answer the demo prints. */
const Answer = z.object({
  response: z.object({
    allowed: z.boolean(),
    patch: z.string().optional(),
    warnings: z.array(z.string()).optional(),
    status: z.object({ message: z.string() }).optional(),
  }),
});
const Named = z.looseObject({
  metadata: z.looseObject({ name: z.string().optional(), namespace: z.string().optional() }).optional(),
});

function post(url: string, path: string, body: unknown, agent: HttpsAgent): Promise<z.infer<typeof Answer>> {
  return new Promise((resolvePost, reject) => {
    const data = JSON.stringify(body);
    const req = request(
      new URL(path, url),
      {
        method: 'POST',
        agent,
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data) },
      },
      (res) => {
        let text = '';
        res.on('data', (c: Buffer) => (text += c.toString()));
        res.on('end', () => {
          try {
            resolvePost(Answer.parse(JSON.parse(text)));
          } catch (err) {
            reject(err instanceof Error ? err : new Error(String(err)));
          }
        });
      },
    );
    req.on('error', reject);
    req.end(data);
  });
}

function review(object: unknown, uid: string) {
  const meta = Named.parse(object).metadata;
  return {
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid,
      kind: { group: '', version: 'v1', kind: 'Service' },
      resource: { group: '', version: 'v1', resource: 'services' },
      name: meta?.name,
      namespace: meta?.namespace,
      operation: 'CREATE',
      userInfo: { username: 'demo' },
      object,
      oldObject: null,
      dryRun: false,
    },
  };
}

/** Admission as the API server runs it: mutate, apply the patch, validate. */
async function admitExamples(url: string, ca: string): Promise<Record<string, unknown>[]> {
  const agent = new HttpsAgent({ ca, keepAlive: true });
  const admitted: Record<string, unknown>[] = [];
  try {
    say(`\n== admission: manifests/examples through the webhook at ${url}`);
    let n = 0;
    for (const file of (await readdir(EXAMPLES)).filter((f) => /\.ya?ml$/.test(f)).sort()) {
      for (const doc of loadAll(await readFile(join(EXAMPLES, file), 'utf8'))) {
        const parsed = Named.safeParse(doc);
        if (!parsed.success) continue;
        const meta = parsed.data.metadata;
        const key = `${meta?.namespace ?? 'default'}/${meta?.name ?? ''}`;
        const m = (await post(url, '/mutate', review(doc, `demo-${++n}`), agent)).response;
        const patch = m.patch ? (JSON.parse(Buffer.from(m.patch, 'base64').toString()) as fjp.Operation[]) : [];
        const object = fjp.applyPatch(structuredClone(parsed.data), patch, true, false).newDocument;
        const v = (await post(url, '/validate', review(object, `demo-${++n}`), agent)).response;
        const warnings = [...(m.warnings ?? []), ...(v.warnings ?? [])];
        if (!v.allowed) {
          say(`REJECTED  ${key.padEnd(24)} ${file}\n          ${v.status?.message ?? ''}`);
          continue;
        }
        const verdict = patch.length > 0 ? 'PATCHED ' : warnings.length > 0 ? 'WARNED  ' : 'ALLOWED ';
        say(`${verdict}  ${key.padEnd(24)} ${file}`);
        if (patch.length > 0) say(`          patch: ${JSON.stringify(patch)}`);
        for (const w of warnings) say(`          warning: ${w}`);
        admitted.push(object);
      }
    }
  } finally {
    agent.destroy();
  }
  return admitted;
}

function canProgramNetns(): boolean {
  return (
    process.getuid?.() === 0 && spawnSync('nft', ['--version']).status === 0 && spawnSync('ip', ['-V']).status === 0
  );
}

async function realAgent(admitted: Record<string, unknown>[]): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'flowhint-demo-'));
  const ip = (...a: string[]) => execFileSync('ip', a, { stdio: ['ignore', 'ignore', 'pipe'] });
  try {
    spawnSync('ip', ['netns', 'del', NETNS]);
    ip('netns', 'add', NETNS);
    const inNs = (...a: string[]) => ip('netns', 'exec', NETNS, ...a);
    inNs('ip', 'link', 'set', 'lo', 'up');
    inNs('ip', 'link', 'add', 'demo0', 'type', 'veth', 'peer', 'name', 'demo1');
    inNs('ip', 'addr', 'add', '192.0.2.1/24', 'dev', 'demo0');
    inNs('ip', 'link', 'set', 'demo0', 'up');
    inNs('ip', 'link', 'set', 'demo1', 'up');
    await writeFile(join(dir, 'admitted.json'), JSON.stringify({ apiVersion: 'v1', kind: 'List', items: admitted }));
    const run = makeRunner(['ip', 'netns', 'exec', NETNS]);
    const agent = new Agent({
      run,
      nft: makeNft(run),
      source: new FileSource({ dir, logger: silentLogger() }),
      logger: silentLogger(),
      metrics: createAgentMetrics({ defaultMetrics: false }),
      defaultThreshold: 20,
      devices: {},
      counter: true,
    });
    await agent.prepare();
    const r = await agent.sync();
    await agent.stop();
    say(
      `\n== agent: programmed network namespace ${NETNS} (${r.ok ? 'ok' : `FAILED: ${r.error}`}, ${r.kind} sync in ${Math.round(r.durationMs)} ms)`,
    );
    say(await makeNft(run).listText());
    say('== flowhint status');
    say(formatStatus(agent.statusDoc()));
  } finally {
    spawnSync('ip', ['netns', 'del', NETNS]);
    await rm(dir, { recursive: true, force: true });
  }
}

function dryRun(admitted: Record<string, unknown>[]): void {
  const entries = admitted.flatMap((o) => {
    const r = readHint(o);
    return r.usable ? [serviceEntry(r.hint, 20)] : [];
  });
  say('\n== agent: dry run (not root, or no nft/ip): the transaction it would apply, with a flowtable kernel');
  say(renderFull(buildDesired(entries, []), { flowtable: true, devices: ['eth0'], counter: true }));
}

const DemoFlags = z.object({ 'dry-run': z.boolean().default(false) });

export async function demoCommand(argv: string[]): Promise<number> {
  const f = parseFlags(
    argv,
    {
      'dry-run': { type: 'boolean', help: 'print the transaction instead of programming a scratch network namespace' },
    },
    DemoFlags,
    'usage: flowhint demo [--dry-run]\n  The whole flow locally (npm start): dev certificates, the real webhook, the examples, the agent in a scratch netns.',
  );
  const dry = f['dry-run'];
  await ensureCerts();
  const webhook = await startWebhook({
    certFile: join(CERTS, FILES.cert),
    keyFile: join(CERTS, FILES.key),
    host: '127.0.0.1',
    port: 0,
    logger: silentLogger(),
  });
  let cleaned = false;
  const cleanup = async () => {
    if (cleaned) return;
    cleaned = true;
    await webhook.close();
    spawnSync('ip', ['netns', 'del', NETNS]);
  };
  process.once('SIGINT', () => void cleanup().then(() => process.exit(130)));
  try {
    const admitted = await admitExamples(webhook.url, await readFile(join(CERTS, FILES.caCert), 'utf8'));
    say(`\n${admitted.length} admitted; ${admitted.filter((o) => readHint(o).usable).length} hinted for the agent`);
    if (!dry && canProgramNetns()) await realAgent(admitted);
    else dryRun(admitted);
  } finally {
    await cleanup();
  }
  // The last line says where real offload is seen: this machine's kernel (or a dry run) shows
  // the ruleset, not [OFFLOAD] connections.
  say(
    '\nto see real offload: `npm run test:kernel` boots a flowtable kernel under qemu and shows [OFFLOAD] connections with traffic (docs/testing.md)',
  );
  return 0;
}

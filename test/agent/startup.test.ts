/**
 * Start-up failures and signals, with the real CLI in child processes: every failure is one
 * catalogue error (`flowhint: CODE: message`, no stack trace) and a bounded exit; SIGTERM
 * ends the agent in every state (a failed start, a hung API server, --once).
 */
import t, { type Test } from 'tap';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createServer, type Server, type Socket } from 'node:net';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { agentCliFixture } from '../helpers/agent-cli.ts';
import { eventually } from '../helpers/eventually.ts';

const { ns, dir, state } = agentCliFixture(t, 'startup');
const base = ['--state-dir', state, '--netns', ns.name, '--metrics-host', '127.0.0.1'];
const env = (extra: Record<string, string | undefined> = {}) => {
  const e: Record<string, string | undefined> = { ...process.env, KUBERNETES_SERVICE_HOST: undefined, ...extra };
  const out: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(e)) if (v !== undefined) out[k] = v;
  return out;
};
const cli = (args: string[], extra: Record<string, string | undefined> = {}) =>
  spawnSync(process.execPath, ['bin/flowhint.ts', ...args], { encoding: 'utf8', timeout: 60_000, env: env(extra) });

/** One catalogue line on stderr and no stack trace. */
function catalogueError(t: Test, stderr: string, code: string): void {
  t.match(stderr, new RegExp(`^flowhint: ${code}: `, 'm'), `says ${code}`);
  t.notMatch(stderr, /\n\s+at /, 'no stack trace');
}

/** A TCP server that accepts and never answers: an API server that hangs. */
async function hangingServer(t: Test): Promise<number> {
  const sockets: Socket[] = [];
  const server: Server = createServer((s) => sockets.push(s));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => {
    for (const s of sockets) s.destroy();
    server.close();
  });
  return (server.address() as { port: number }).port;
}

function kubeconfig(port: number): string {
  const file = join(dir, `kubeconfig-${port}`);
  writeFileSync(
    file,
    `apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: "https://127.0.0.1:${port}", insecure-skip-tls-verify: true}}]\nusers: [{name: u, user: {token: x}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\n`,
  );
  return file;
}

/** Start the CLI, wait for `ready` on its output, send SIGTERM, and resolve with the exit code and the time it took. */
async function termAfter(args: string[], ready: RegExp): Promise<{ code: number | null; ms: number; out: string }> {
  const child: ChildProcess = spawn(process.execPath, ['bin/flowhint.ts', ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: env(),
  });
  let out = '';
  const onData = (c: Buffer) => (out += c.toString());
  child.stdout?.on('data', onData);
  child.stderr?.on('data', onData);
  const exited = new Promise<number | null>((r) => child.once('exit', r));
  await eventually(`output matching ${String(ready)}`, () => ready.test(out), { timeoutMs: 30_000 });
  const sent = Date.now();
  child.kill('SIGTERM');
  const killer = setTimeout(() => child.kill('SIGKILL'), 15_000);
  const code = await exited;
  clearTimeout(killer);
  return { code, ms: Date.now() - sent, out };
}

t.test('the metrics port in use: FH_LISTEN_FAILED, exit 1, nothing left running', async (t) => {
  const port = await hangingServer(t);
  const r = cli(['agent', '--services-dir', dir, ...base, '--metrics-port', String(port)]);
  t.equal(r.status, 1, 'exits by itself, without a signal');
  catalogueError(t, r.stderr, 'FH_LISTEN_FAILED');
  t.match(r.stderr, /the port is in use; pass a free port with --metrics-port/);
  const w = cli([
    'webhook',
    '--cert',
    'x',
    '--key',
    'y',
    '--metrics-port',
    String(port),
    '--port',
    '0',
    '--host',
    '127.0.0.1',
  ]);
  t.equal(w.status, 1, 'the webhook too');
  t.notMatch(w.stderr, /\n\s+at /, 'no stack trace from the webhook');
});

t.test('--once: an unreadable services dir, a missing netns, no kubeconfig: each one error, exit 1', async (t) => {
  const nodir = cli(['agent', '--services-dir', join(dir, 'nope'), ...base, '--once']);
  t.equal(nodir.status, 1);
  catalogueError(t, nodir.stderr, 'FH_SERVICES_DIR_UNREADABLE');
  const nons = cli(['agent', '--services-dir', dir, '--state-dir', state, '--netns', 'flowhint-no-such-ns', '--once']);
  t.equal(nons.status, 1);
  catalogueError(t, nons.stderr, 'FH_NETNS_MISSING');
  t.notMatch(
    nons.stderr + nons.stdout,
    /flowtable support|nf_conntrack loaded|iproute2/,
    'and no misleading diagnosis',
  );
  const nokc = cli(['agent', ...base, '--once'], { KUBECONFIG: undefined, HOME: join(dir, 'no-home') });
  t.equal(nokc.status, 1);
  catalogueError(t, nokc.stderr, 'FH_NO_KUBECONFIG');
  t.match(nokc.stderr, /pass --kubeconfig/);
  writeFileSync(join(dir, 'broken-kubeconfig'), 'clusters: [');
  const badkc = cli(['agent', '--kubeconfig', join(dir, 'broken-kubeconfig'), ...base, '--once']);
  t.equal(badkc.status, 1);
  catalogueError(t, badkc.stderr, 'FH_KUBECONFIG_INVALID');
});

t.test('--once against an API server that refuses: FH_API_UNREACHABLE; that hangs: FH_ONCE_TIMEOUT', async (t) => {
  const closed = await hangingServer(t);
  const refusedPort = await new Promise<number>((r) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const p = (s.address() as { port: number }).port;
      s.close(() => r(p));
    });
  });
  const refused = cli(['agent', '--kubeconfig', kubeconfig(refusedPort), ...base, '--once']);
  t.equal(refused.status, 1);
  catalogueError(t, refused.stderr, 'FH_API_UNREACHABLE');
  const hung = cli(['agent', '--kubeconfig', kubeconfig(closed), ...base, '--once', '--once-timeout', '2']);
  t.equal(hung.status, 1);
  catalogueError(t, hung.stderr, 'FH_ONCE_TIMEOUT');
});

t.test('SIGTERM ends the agent while its API server hangs, and during --once', async (t) => {
  const port = await hangingServer(t);
  const running = await termAfter(['agent', '--kubeconfig', kubeconfig(port), ...base, '--metrics-port', '0'], /"msg"/);
  t.equal(running.code, 0, 'exit 0');
  t.ok(running.ms < 5_000, `within 5 s (${running.ms} ms)`);
  const once = await termAfter(['agent', '--kubeconfig', kubeconfig(port), ...base, '--once'], /"msg"/);
  t.not(once.code, null, 'exits on its own after the signal');
  t.ok(once.ms < 5_000, `within 5 s (${once.ms} ms)`);
});

t.test('demo --help prints its usage and runs nothing', async (t) => {
  const r = cli(['demo', '--help']);
  t.equal(r.status, 0);
  t.match(r.stdout, /^usage: flowhint demo \[--dry-run\]/);
  t.notMatch(r.stdout, /== admission/, 'no demo ran');
  t.notMatch(spawnSync('ip', ['netns', 'list'], { encoding: 'utf8' }).stdout, /flowhint-demo/);
});

/** The agent CLI in a scratch namespace: --once, status, a second agent refused, SIGTERM, cleanup. */
import t from 'tap';
import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { agentCliFixture } from '../helpers/agent-cli.ts';
import { eventually } from '../helpers/eventually.ts';

const { ns, dir, state } = agentCliFixture(t, 'cli');
const cli = (...args: string[]) =>
  spawnSync(process.execPath, ['bin/flowhint.ts', ...args], { encoding: 'utf8', timeout: 60_000 });
const agentArgs = [
  'agent',
  '--services-dir',
  dir,
  '--state-dir',
  state,
  '--netns',
  ns.name,
  '--metrics-port',
  '0',
  '--metrics-host',
  '127.0.0.1',
];

t.test('--once programs and exits 0; status reads it', async (t) => {
  const r = cli(...agentArgs, '--once');
  t.equal(r.status, 0, r.stderr);
  t.match(ns.sh('nft', 'list', 'table', 'inet', 'flowhint'), /10\.96\.0\.10 : goto v4_/);
  const s = cli('status', '--state-dir', state, '--netns', ns.name);
  t.equal(s.status, 1, 'the --once agent has exited: status says so, and exits 1');
  t.match(s.stdout, /^agent: NOT RUNNING: pid \d+ has ended; below is its last status, written /m);
  t.match(s.stdout, /^node: degraded: kernel has no flowtable support/m);
  t.match(s.stdout, /demo\/a\s+10\.96\.0\.10\s+tcp\/80\s+after 20 packets\s+offloaded now: 0/);
  const j = JSON.parse(cli('status', '--json', '--state-dir', state, '--netns', ns.name).stdout);
  t.equal(j.lastSync.ok, true);
  t.equal(j.agentRunning, false);
  t.equal(cli('status', '--state-dir', join(state, 'nope')).status, 1, 'no status file: exit 1 with a message');
});

t.test('a running agent: a second refuses; SIGTERM exits 0 and leaves the rules', async (t) => {
  const first = spawn(process.execPath, ['bin/flowhint.ts', ...agentArgs], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  first.stdout.on('data', (c: Buffer) => (out += c.toString()));
  await eventually('the first agent synced', () => /"msg":"synced"/.test(out));
  await sleep(1_000); // its status file follows the sync within half a second
  const live = cli('status', '--state-dir', state, '--netns', ns.name);
  t.equal(live.status, 0, 'status of a running agent exits 0');
  t.notMatch(live.stdout, /NOT RUNNING/);
  const second = cli(...agentArgs, '--once');
  t.equal(second.status, 1);
  t.match(second.stderr, /FH_AGENT_RUNNING/);
  first.kill('SIGTERM');
  const code = await new Promise((r) => first.once('exit', r));
  t.equal(code, 0, 'exit 0 on SIGTERM');
  t.match(out, /rules left in place/);
  t.match(ns.sh('nft', 'list', 'table', 'inet', 'flowhint'), /10\.96\.0\.10/, 'rules kept');
});

t.test('kill -9, then a restart: the table survives and the restart converges on it unchanged', async (t) => {
  const before = ns.sh('nft', 'list', 'table', 'inet', 'flowhint');
  const a = spawn(process.execPath, ['bin/flowhint.ts', ...agentArgs], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  a.stdout.on('data', (c: Buffer) => (out += c.toString()));
  await eventually('the agent synced', () => /"msg":"synced"/.test(out));
  a.kill('SIGKILL');
  await new Promise((r) => a.once('exit', r));
  t.equal(ns.sh('nft', 'list', 'table', 'inet', 'flowhint'), before, 'rules as they were');
  const r = cli(...agentArgs, '--once');
  t.equal(r.status, 0, 'the lock died with the process; the restart runs');
  t.equal(ns.sh('nft', 'list', 'table', 'inet', 'flowhint'), before, 'and leaves the ruleset unchanged');
});

t.test('SIGTERM in the middle of a sync: the transaction completes, then exit 0', async (t) => {
  ns.sh('nft', 'delete', 'table', 'inet', 'flowhint');
  const bin = mkdtempSync(join(tmpdir(), 'flowhint-slow-nft-'));
  t.teardown(() => rmSync(bin, { recursive: true, force: true }));
  const real = spawnSync('sh', ['-c', 'command -v nft'], { encoding: 'utf8' }).stdout.trim();
  // A slow `nft -f` that says when it has started.
  writeFileSync(
    join(bin, 'nft'),
    `#!/bin/sh\nif [ "$1" = "-f" ]; then touch '${bin}/in-sync'; sleep 2; fi\nexec ${real} "$@"\n`,
  );
  chmodSync(join(bin, 'nft'), 0o755);
  const a = spawn(process.execPath, ['bin/flowhint.ts', ...agentArgs], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, PATH: `${bin}:${process.env.PATH}` },
  });
  let out = '';
  a.stdout.on('data', (c: Buffer) => (out += c.toString()));
  await eventually('the agent inside nft -f', () => existsSync(join(bin, 'in-sync')));
  a.kill('SIGTERM');
  const code = await new Promise((r) => a.once('exit', r));
  t.equal(code, 0);
  t.match(out, /"msg":"synced"/, 'the in-flight sync finished before the exit');
  t.match(
    ns.sh('nft', 'list', 'table', 'inet', 'flowhint'),
    /10\.96\.0\.10 : goto v4_/,
    'and its transaction is in the kernel, whole',
  );
});

t.test('cleanup deletes the tables; twice is fine', async (t) => {
  t.match(ns.sh('nft', 'list', 'tables'), /table ip flowhint/, 'the agent made the ip table too');
  t.equal(cli('cleanup', '--netns', ns.name).status, 0);
  t.notMatch(ns.sh('nft', 'list', 'tables'), /flowhint$/m, 'none of the three is left');
  t.equal(cli('cleanup', '--netns', ns.name).status, 0);
});

t.test('cleanup in a namespace that does not exist fails, never "nothing to clean up"', async (t) => {
  const r = cli('cleanup', '--netns', 'flowhint-no-such-ns');
  t.equal(r.status, 1);
  t.match(r.stderr, /^flowhint: FH_NETNS_MISSING: network namespace "flowhint-no-such-ns" does not exist/m);
  t.notMatch(r.stderr, /nothing to clean up/);
});

t.test('bad flags exit 2 and name the flag', async (t) => {
  const r = cli('agent', '--offload-after-packets', '-5', '--services-dir', dir);
  t.equal(r.status, 2);
  t.match(r.stderr, /--offload-after-packets/);
  t.equal(cli('agent', '--devices', '(', '--services-dir', dir).status, 2);
  for (const bad of ['0x3000', '0', '0x80000000', '0x100000000', 'bit', '0x', '3']) {
    const m = cli('agent', '--ct-mark-bit', bad, '--services-dir', dir, '--once');
    t.equal(m.status, 2, `--ct-mark-bit ${bad} refused`);
    t.match(m.stderr, /--ct-mark-bit: .* is not one of bits 0 to 30 of the conntrack mark/);
  }
});

t.test('--ct-mark-bit: the bit the NAT chain sets is the one the forward chain tests', async (t) => {
  const r = cli(...agentArgs, '--once', '--ct-mark-bit', '0x40000000');
  t.equal(r.status, 0, r.stderr);
  const text = ns.sh('nft', 'list', 'table', 'inet', 'flowhint');
  t.match(ns.sh('nft', 'list', 'table', 'ip', 'flowhint'), /ct mark set ct mark \| 0x40000000/);
  t.match(
    text,
    /ct mark & 0x40001000 == 0x40000000 ct packets > \d+ goto hinted/,
    'LongLived: the bit without the ShortLived bit',
  );
  t.notMatch(text, /0x00002000/, 'and not the default');
  const again = cli(...agentArgs, '--once', '--ct-mark-bit', '0x40000000');
  t.match(again.stdout, /"kind":"full".*"drift":false/, 'the rules read back as written: no false drift');
  t.equal(cli(...agentArgs, '--once').status, 0, 'back to the default bit');
  t.match(
    ns.sh('nft', 'list', 'table', 'inet', 'flowhint'),
    /ct mark & 0x00003000 == 0x00002000 ct packets > \d+ goto hinted/,
  );
});

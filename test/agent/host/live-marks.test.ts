/**
 * A LongLived hint reaches the connections already open (issue 32): the agent sets flowhint's
 * mark bit on them after the sync that programs the hint. The argv and the added elements
 * as data, then the real thing in a scratch namespace on this machine's kernel.
 */
import t from 'tap';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  ATTEMPTS,
  PASS_ABOVE,
  markArgv,
  markLive,
  unmarkedArgv,
  updateOutcome,
} from '../../../agent/host/live-marks.ts';
import type { Runner } from '../../../lib/exec.ts';
import { silentLogger } from '../../../lib/log.ts';
import { capturedLogs } from '../../helpers/logs.ts';
import { addedLong } from '../../../agent/state/delta.ts';
import { buildDesired } from '../../../agent/state/desired.ts';
import { parseAddress } from '../../../agent/state/address.ts';
import { entry } from '../../helpers/agent.ts';
import { setup, yaml } from '../../helpers/netns-agent.ts';

t.test('one conntrack update per (address, protocol, port), keeping the other bits', async (t) => {
  const v4 = { address: parseAddress('10.96.0.10')!, proto: 'udp' as const, port: 53 };
  t.same(markArgv(v4, 0x2000), [
    'conntrack',
    '-U',
    '-f',
    'ipv4',
    '-p',
    'udp',
    '--orig-dst',
    '10.96.0.10',
    '--dport',
    '53',
    '--mark',
    '0x2000/0x2000',
  ]);
  const v6 = { address: parseAddress('fd00::10')!, proto: 'tcp' as const, port: 443 };
  t.same(markArgv(v6, 0x10).slice(2, 8), ['-f', 'ipv6', '-p', 'tcp', '--orig-dst', 'fd00::10']);
  t.throws(() => markArgv(v4, 0x3000), /not a single bit/);
});

t.test("conntrack's answer: all updated, nothing left, or stopped part way (as 1.4.7 printed them)", async (t) => {
  t.same(updateOutcome(0, 'conntrack v1.4.7 (conntrack-tools): 225 flow entries have been updated.\n'), {
    updated: 225,
    done: true,
  });
  t.same(updateOutcome(1, 'conntrack v1.4.7 (conntrack-tools): 0 flow entries have been updated.\n'), {
    updated: 0,
    done: true,
  });
  t.same(
    updateOutcome(
      1,
      'conntrack v1.4.7 (conntrack-tools): Operation failed: No buffer space available\nOperation failed: Protocol error\n',
    ),
    { updated: 0, done: false },
    'a busy table: part way, try again',
  );
  t.same(updateOutcome(1, 'conntrack v1.4.7 (conntrack-tools): Operation not permitted\n'), {
    updated: 0,
    done: false,
  });
  t.same(updateOutcome(127, ''), { updated: 0, done: false });
});

t.test('an update stopped part way is repeated, a few times at most', async (t) => {
  const e = { address: parseAddress('10.96.0.10')!, proto: 'tcp' as const, port: 80 };
  const answers = [
    { code: 1, stdout: '', stderr: 'Operation failed: No buffer space available\n' },
    { code: 0, stdout: '', stderr: '7 flow entries have been updated.\n' },
  ];
  const calls: string[] = [];
  const run: Runner = async (argv) => {
    calls.push(argv.join(' '));
    return answers.shift() ?? { code: 1, stdout: '', stderr: 'Operation failed: Protocol error\n' };
  };
  t.equal(await markLive(run, [e], 0x2000, silentLogger()), 7);
  t.equal(calls.length, 2, 'once more after the failure, then done');
  calls.length = 0;
  const { logger, lines } = capturedLogs();
  t.equal(await markLive(run, [e, e], 0x2000, logger), 0);
  t.equal(calls.length, 2 * ATTEMPTS, 'never more than ATTEMPTS per port');
  t.match(lines, [
    {
      level: 40,
      failed: 2,
      reason: 'Operation failed: Protocol error',
      msg: 'cannot mark every live connection of newly hinted Services; the rest are offloaded when they reconnect',
    },
  ]);
  t.equal(lines.length, 1, 'one line for the batch');
});

t.test('what the batch says, and SIGTERM stops it between ports', async (t) => {
  const e = { address: parseAddress('10.96.0.10')!, proto: 'tcp' as const, port: 80 };
  const answer = (n: number) => async () => ({
    code: n > 0 ? 0 : 1,
    stdout: '',
    stderr: `${n} flow entries have been updated.\n`,
  });
  const some = capturedLogs();
  t.equal(await markLive(answer(3), [e, e], 0x2000, some.logger), 6);
  t.match(some.lines, [{ level: 30, marked: 6, ports: 2, msg: 'live connections of newly hinted Services marked' }]);
  t.equal(some.lines.length, 1);
  const none = capturedLogs();
  t.equal(await markLive(answer(0), [e], 0x2000, none.logger), 0);
  t.same(none.lines, [], 'nothing to mark: nothing said');
  const calls: string[] = [];
  let stop = false;
  const run: Runner = async (argv) => {
    calls.push(argv.join(' '));
    stop = true;
    return { code: 1, stdout: '', stderr: 'Operation failed: No buffer space available\n' };
  };
  const stopped = capturedLogs();
  await markLive(run, [e, e, e], 0x2000, stopped.logger, () => stop);
  t.equal(calls.length, 1, 'no further attempt or port once stopping');
  t.same(stopped.lines, [], 'and no failure reported for what it did not try');
});

t.test('many ports: one dump of the unmarked entries first, then updates only where connections live', async (t) => {
  const e = (addr: string, proto: 'tcp' | 'udp', port: number) => ({ address: parseAddress(addr)!, proto, port });
  const elements = [
    e('10.96.0.10', 'tcp', 80),
    e('10.96.0.10', 'udp', 53),
    e('10.96.0.11', 'tcp', 443),
    e('fd00:96::11', 'tcp', 443),
  ];
  t.ok(elements.length > PASS_ABOVE);
  t.same(unmarkedArgv(0x2000), ['conntrack', '-L', '--mark', '0x0/0x2000']);
  t.throws(() => unmarkedArgv(3), /not a single bit/);
  // What conntrack 1.4.7 printed for such entries (the reply half shortened).
  const dump = [
    'tcp      6 431999 ESTABLISHED src=10.0.1.2 dst=10.96.0.10 sport=40000 dport=80 src=10.0.2.2 dst=10.0.1.2 sport=8080 dport=40000 [ASSURED] mark=5 use=1',
    'udp      17 29 src=10.0.1.2 dst=10.96.0.10 sport=40001 dport=54 [UNREPLIED] src=10.0.2.2 dst=10.0.1.2 sport=54 dport=40001 mark=0 use=1',
    'tcp      6 431999 ESTABLISHED src=fd00::2 dst=fd00:96:0:0::11 sport=40002 dport=443 src=fd00::3 dst=fd00::2 sport=443 dport=40002 [ASSURED] mark=0 use=1',
    'tcp      6 431999 ESTABLISHED src=10.0.1.2 dst=10.96.0.11 sport=40003 dport=444 src=10.0.2.3 dst=10.0.1.2 sport=444 dport=40003 [ASSURED] mark=0 use=1',
  ];
  const calls: string[] = [];
  const run: Runner = async (argv) => {
    calls.push(argv.join(' '));
    if (argv[1] === '-L')
      return { code: 0, stdout: dump.join('\n') + '\n', stderr: '4 flow entries have been shown.\n' };
    return { code: 0, stdout: '', stderr: '1 flow entries have been updated.\n' };
  };
  t.equal(await markLive(run, elements, 0x2000, silentLogger()), 2);
  t.same(
    calls,
    [
      'conntrack -L --mark 0x0/0x2000',
      'conntrack -U -f ipv4 -p tcp --orig-dst 10.96.0.10 --dport 80 --mark 0x2000/0x2000',
      'conntrack -U -f ipv6 -p tcp --orig-dst fd00:96::11 --dport 443 --mark 0x2000/0x2000',
    ],
    'udp/53 and 10.96.0.11:443 have no live connection (54 and 444 are other ports); the IPv6 address matches in any spelling',
  );

  // The dump fails: every port is updated, as without it.
  calls.length = 0;
  const failing: Runner = async (argv) => {
    calls.push(argv.join(' '));
    return argv[1] === '-L'
      ? { code: 1, stdout: '', stderr: 'Operation failed: No buffer space available\n' }
      : { code: 1, stdout: '', stderr: '0 flow entries have been updated.\n' };
  };
  await markLive(failing, elements, 0x2000, silentLogger());
  t.equal(calls.length, 1 + elements.length, 'one dump, then one update per port');
  // Few ports: no dump.
  calls.length = 0;
  await markLive(run, elements.slice(0, PASS_ABOVE), 0x2000, silentLogger());
  t.same(
    calls.filter((c) => c.includes(' -L ')),
    [],
    'no dump for a port or two',
  );
});

t.test('the elements a sync adds', async (t) => {
  const a = entry({ name: 'a', clusterIPs: ['10.96.0.10'], ports: [{ port: 80 }, { port: 53, protocol: 'UDP' }] });
  const b = entry({ name: 'b', clusterIPs: ['10.96.0.11', 'fd00::11'], ports: [{ port: 443 }] });
  const one = buildDesired([a], []);
  const two = buildDesired([a, b], []);
  const text = (s: ReturnType<typeof addedLong>) => s.map((e) => `${e.address.addr}|${e.proto}|${e.port}`).sort();
  t.same(text(addedLong(undefined, one)), ['10.96.0.10|tcp|80', '10.96.0.10|udp|53'], 'from nothing: all');
  t.same(text(addedLong(one, two)), ['10.96.0.11|tcp|443', 'fd00::11|tcp|443'], 'only the new ones');
  t.same(addedLong(two, one), [], 'a removal adds nothing');
  const short = entry({ name: 'c', hint: 'ShortLived', clusterIPs: ['10.96.0.12'], ports: [{ port: 80 }] });
  t.same(addedLong(one, buildDesired([a, short], [])), [], 'ShortLived ports are never marked');
});

t.test('in the kernel: a connection opened before the hint carries the bit after the sync', async (t) => {
  const { ns, dir, make } = setup(t);
  // 10/8 local, so datagrams to the Service address are tracked without a route out; a
  // rule that uses conntrack (and marks new connections 0x5, to see the other bits kept).
  ns.sh('ip', 'addr', 'add', '10.0.0.1/8', 'dev', 'lo');
  ns.sh(
    'nft',
    'add table ip pre; add chain ip pre o { type filter hook output priority 0; }; add rule ip pre o ct state new ct mark set 0x5',
  );
  const send = (port: number) =>
    ns.sh(
      'python3',
      '-c',
      `import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x', ('10.96.0.10', ${port}))`,
    );
  send(53);
  send(54);
  const mark = (port: number) =>
    /mark=(\d+)/.exec(ns.sh('conntrack', '-L', '-p', 'udp', '--orig-dst', '10.96.0.10', '--dport', String(port)))?.[1];
  t.equal(mark(53), '5', 'before the hint: only its first packet marked it');
  writeFileSync(join(dir, 'a.yaml'), yaml('a', '10.96.0.10'));
  const { agent } = make();
  await agent.prepare();
  t.ok((await agent.sync()).ok);
  await agent.marked();
  t.equal(mark(53), String(0x2000 | 0x5), "the hinted port's live connection: flowhint's bit, the others kept");
  t.equal(mark(54), '5', 'another port of the same address: untouched');
  await agent.stop();
});

/**
 * conntrack -L parsing and per-Service counts, on lines Debian's 6.1 kernel printed in the VM
 * (test/kernel); the dump the agent asks for (one, of flowhint's mark bit, which every hinted
 * connection carries; none when nothing is hinted), read as a stream where the runner can.
 */
import t from 'tap';
import { parseAddress } from '../../../agent/state/address.ts';
import {
  conntrackDestinations,
  countByService,
  entriesByService,
  readConntrackCounts,
} from '../../../agent/host/conntrack.ts';
import type { Runner } from '../../../lib/exec.ts';
import { buildDesired } from '../../../agent/state/desired.ts';
import { entry } from '../../helpers/agent.ts';

const LINES = [
  'tcp      6 src=10.0.1.2 dst=10.96.0.10 sport=47892 dport=80 packets=6196 bytes=271837509 src=10.0.2.2 dst=10.0.1.2 sport=5201 dport=47892 packets=4401 bytes=228860 [OFFLOAD] mark=0 use=2',
  'tcp      6 119 TIME_WAIT src=10.0.1.2 dst=10.96.0.10 sport=47890 dport=80 packets=16 bytes=1293 src=10.0.2.2 dst=10.0.1.2 sport=5201 dport=47890 packets=13 bytes=1018 [ASSURED] mark=0 use=2',
  'udp      17 4 src=10.0.1.2 dst=10.96.0.53 sport=48316 dport=53 src=10.0.2.2 dst=10.0.1.2 sport=7000 dport=48316 mark=0 use=1',
  'udp      17 27 src=10.0.1.2 dst=10.96.0.53 sport=48317 dport=53 src=10.0.2.2 dst=10.0.1.2 sport=7000 dport=48317 mark=0 use=1',
  'ipv6     10 udp      17 src=fd01::2 dst=fd00:96::10 sport=40000 dport=53 src=fd02::2 dst=fd01::2 sport=7000 dport=40000 [OFFLOAD] mark=0 use=2',
  'icmp     1 29 src=10.0.1.2 dst=10.0.1.1 type=8 code=0 id=1 src=10.0.1.1 dst=10.0.1.2 type=0 code=0 id=1 mark=0 use=1',
  'conntrack v1.4.7 (conntrack-tools): 6 flow entries have been shown.',
].join('\n');

t.test('destinations: TCP and UDP entries by original destination, offloaded or not; others skipped', async (t) => {
  t.same(conntrackDestinations(LINES), [
    { proto: 'tcp', addr: 'ip 10.96.0.10', port: 80, offloaded: true },
    { proto: 'tcp', addr: 'ip 10.96.0.10', port: 80, offloaded: false },
    { proto: 'udp', addr: 'ip 10.96.0.53', port: 53, offloaded: false },
    { proto: 'udp', addr: 'ip 10.96.0.53', port: 53, offloaded: false },
    { proto: 'udp', addr: 'ip6 fd00:96::10', port: 53, offloaded: true },
  ]);
});

const state = () =>
  buildDesired(
    [
      entry({
        name: 'web',
        clusterIPs: ['10.96.0.10', 'fd00:96::10'],
        ports: [{ port: 80 }, { port: 53, protocol: 'UDP' }],
      }),
      entry({ name: 'dns', hint: 'ShortLived', clusterIPs: ['10.96.0.53'], ports: [{ port: 53, protocol: 'UDP' }] }),
      entry({ name: 'idle', clusterIPs: ['10.96.0.99'] }),
    ],
    [parseAddress('10.0.1.1')!],
  );

t.test('counts: offloaded per LongLived Service, every entry per ShortLived Service', async (t) => {
  const dests = conntrackDestinations(LINES);
  t.same(
    Object.fromEntries(countByService(state(), dests)),
    { 'default/web': 2, 'default/idle': 0 },
    'the TIME_WAIT entry is not offloaded; ShortLived Services are not counted here',
  );
  t.same(
    Object.fromEntries(entriesByService(state(), dests)),
    { 'default/dns': 2 },
    'both DNS entries, offloaded or not',
  );
});

/** A runner that answers each mark filter with the lines of LINES the kernel would keep for it. */
function fakeConntrack(marked: Record<string, string[]>, streaming: boolean) {
  const calls: string[][] = [];
  const answer = (argv: readonly string[]) => {
    calls.push([...argv]);
    const mark = argv[argv.indexOf('--mark') + 1] ?? 'none';
    return { lines: marked[mark] ?? [], code: mark in marked ? 0 : 1 };
  };
  const run: Runner = async (argv) => {
    const a = answer(argv);
    return { code: a.code, stdout: a.lines.join('\n'), stderr: '' };
  };
  if (streaming)
    run.lines = async (argv, onLine) => {
      const a = answer(argv);
      a.lines.forEach(onLine);
      return { code: a.code, stdout: '', stderr: '' };
    };
  return { run, calls };
}

const lines = LINES.split('\n');
for (const streaming of [true, false]) {
  t.test(`reads one kernel-filtered dump of flowhint's bit (${streaming ? 'streamed' : 'whole'})`, async (t) => {
    // Every hinted connection carries 0x2000 (ShortLived ones 0x1000 besides): the kernel keeps
    // them all for 0x2000/0x2000, and nothing else (the ICMP entry is not flowhint's).
    const { run, calls } = fakeConntrack({ '0x2000/0x2000': [...lines.slice(0, 5), lines[6]!] }, streaming);
    const counts = await readConntrackCounts(run, state(), { long: 0x2000, short: 0x1000 });
    t.same(calls, [['conntrack', '-L', '--mark', '0x2000/0x2000']], 'one dump, both counts');
    t.same(Object.fromEntries(counts!.offloaded), { 'default/web': 2, 'default/idle': 0 });
    t.same(Object.fromEntries(counts!.entries), { 'default/dns': 2 });
  });
}

t.test('the configured bit; no dump when nothing is hinted; undefined when conntrack fails', async (t) => {
  const longOnly = buildDesired([entry({ name: 'web', clusterIPs: ['10.96.0.10'], ports: [{ port: 80 }] })], []);
  const { run, calls } = fakeConntrack({ '0x4/0x4': [lines[0]!] }, true);
  const counts = await readConntrackCounts(run, longOnly, { long: 0x4, short: 0x8 });
  t.same(calls, [['conntrack', '-L', '--mark', '0x4/0x4']]);
  t.same(Object.fromEntries(counts!.offloaded), { 'default/web': 1 });
  const shortOnly = buildDesired([entry({ name: 'dns', hint: 'ShortLived', clusterIPs: ['10.96.0.53'] })], []);
  const short = fakeConntrack({ '0x4/0x4': [] }, true);
  await readConntrackCounts(short.run, shortOnly, { long: 0x4, short: 0x8 });
  t.same(short.calls, [['conntrack', '-L', '--mark', '0x4/0x4']], 'ShortLived connections carry the flowhint bit too');
  const idle = fakeConntrack({}, true);
  await readConntrackCounts(idle.run, buildDesired([], []));
  t.same(idle.calls, [], 'nothing hinted: no dump');
  const none = await readConntrackCounts(fakeConntrack({}, true).run, buildDesired([], []));
  t.same(none && { offloaded: [...none.offloaded], entries: [...none.entries] }, { offloaded: [], entries: [] });
  t.equal(await readConntrackCounts(fakeConntrack({}, true).run, longOnly), undefined, 'conntrack failed');
});

t.test('every poll counts afresh, and each programmed state counts its own Services', async (t) => {
  const { run } = fakeConntrack({ '0x2000/0x2000': lines.slice(0, 5) }, true);
  const s = state();
  const marks = { long: 0x2000, short: 0x1000 };
  for (const poll of [1, 2, 3]) {
    const c = await readConntrackCounts(run, s, marks);
    t.same(
      Object.fromEntries(c!.offloaded),
      { 'default/web': 2, 'default/idle': 0 },
      `poll ${poll}: not summed over polls`,
    );
    t.same(Object.fromEntries(c!.entries), { 'default/dns': 2 }, `poll ${poll}`);
  }
  // The same Services, web now ShortLived and dns gone: a new state, counted by its own Services.
  const next = buildDesired(
    [
      entry({ name: 'web', hint: 'ShortLived', clusterIPs: ['10.96.0.10', 'fd00:96::10'], ports: [{ port: 80 }] }),
      entry({ name: 'idle', clusterIPs: ['10.96.0.99'] }),
    ],
    [],
  );
  const c = await readConntrackCounts(run, next, marks);
  t.same(Object.fromEntries(c!.offloaded), { 'default/idle': 0 });
  t.same(Object.fromEntries(c!.entries), { 'default/web': 2 }, 'both TCP entries to port 80; the UDP ones no longer');
  const again = await readConntrackCounts(run, s, marks);
  t.same(Object.fromEntries(again!.entries), { 'default/dns': 2 }, 'the earlier state still counts as it did');
});

t.test("a NodePort's connections count by the node's address and the node port", async (t) => {
  const np = buildDesired(
    [entry({ name: 'np', type: 'NodePort', clusterIPs: ['10.96.0.10'], ports: [{ port: 80, nodePort: 30080 }] })],
    [parseAddress('10.0.1.1')!],
  );
  const line = (dst: string, dport: number) =>
    `tcp      6 src=10.0.9.9 dst=${dst} sport=40000 dport=${dport} src=10.0.2.2 dst=10.0.9.9 sport=80 dport=40000 [OFFLOAD] mark=8192 use=2`;
  const { run } = fakeConntrack(
    {
      '0x2000/0x2000': [
        line('10.0.1.1', 30080),
        line('10.0.1.1', 30081),
        line('10.0.1.2', 30080),
        line('10.96.0.10', 80),
      ],
    },
    true,
  );
  const c = await readConntrackCounts(run, np, { long: 0x2000, short: 0x1000 });
  t.same(Object.fromEntries(c!.offloaded), { 'default/np': 2 }, 'the node port on the node address, and the ClusterIP');
});

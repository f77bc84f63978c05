/**
 * The table comparison (drift): each kind of difference, built by hand on a small model, and
 * the exact sentence it gives. What should not exist at all is drift as much as what is
 * missing.
 */
import t from 'tap';
import { tableDiff } from '../../../agent/nft/table-diff.ts';
import type { TableModel } from '../../../agent/nft/table-model.ts';
import type { TimeoutSpec } from '../../../agent/nft/transaction.ts';

type Mutable = {
  -readonly [K in keyof TableModel]: TableModel[K] extends ReadonlyMap<infer A, infer B>
    ? Map<A, B>
    : TableModel[K] extends ReadonlySet<infer A>
      ? Set<A>
      : TableModel[K];
};

const udp5: TimeoutSpec = { protocol: 'udp', l3proto: 'ip', policy: { unreplied: 5, replied: 5 } };

/** The table as it should be: a base chain, a regular chain, a map, a plain and a counting set, a timeout, a flowtable. */
function model(): Mutable {
  return {
    tables: new Set(['inet', 'ip']),
    flowtables: new Map([['fastpath', { devices: new Set(['eth0', 'eth1']), handle: 1 }]]),
    chains: new Map([
      [
        'forward',
        { base: { type: 'filter', hook: 'forward', priority: 0 }, rules: ['ct mark & 0x2000 != 0 flow add @fastpath'] },
      ],
      ['v4_a', { rules: ['meta l4proto tcp th dport 80 accept', 'counter'] }],
    ]),
    maps: new Map([['vips4', { key: 'ipv4_addr', elements: new Map([['10.96.0.1', 'v4_a']]) }]]),
    sets: new Map([
      [
        'long4',
        {
          key: 'ipv4_addr . inet_proto . inet_service',
          dynamic: false,
          elements: new Map([['10.96.0.1 . tcp . 80', 0]]),
        },
      ],
      ['seen4', { key: 'ipv4_addr', dynamic: true, elements: new Map([['10.96.0.1', 7]]) }],
    ]),
    ctTimeouts: new Map([['c4_x', udp5]]),
    counters: new Set(['offloaded']),
    nextHandle: 2,
  };
}

t.test('the same content is no difference; handles and counting-set elements are not content', async (t) => {
  t.same(tableDiff(model(), model()), []);
  const have = model();
  have.flowtables.set('fastpath', { devices: new Set(['eth1', 'eth0']), handle: 9 });
  have.sets.set('seen4', { key: 'ipv4_addr', dynamic: true, elements: new Map([['10.0.0.9', 1]]) });
  have.nextHandle = 40;
  t.same(tableDiff(model(), have), []);
  t.same(tableDiff(undefined, undefined), [], 'no table, none wanted');
});

t.test('the table itself: missing, or there when it should not be', async (t) => {
  t.same(tableDiff(model(), undefined), ['the table is missing']);
  t.same(tableDiff(undefined, model()), ['the table exists but should not']);
});

t.test('one of the three tables: missing, or there when it should not be', async (t) => {
  const have = model();
  have.tables.delete('ip');
  have.tables.add('ip6');
  t.same(tableDiff(model(), have), ['table ip flowhint is missing', 'table ip6 flowhint should not exist']);
});

t.test('chains: missing, extra, another hook, other rules', async (t) => {
  const have = model();
  have.chains.delete('v4_a');
  have.chains.set('v4_old', { rules: [] });
  t.same(tableDiff(model(), have), ['chain v4_a is missing', 'chain v4_old should not exist']);
  const hooked = model();
  hooked.chains.set('forward', {
    base: { type: 'filter', hook: 'forward', priority: 10 },
    rules: ['ct mark & 0x2000 != 0 flow add @fastpath'],
  });
  hooked.chains.set('v4_a', {
    base: { hook: 'prerouting', priority: -150 },
    rules: ['meta l4proto tcp th dport 80 accept', 'counter'],
  });
  t.same(tableDiff(model(), hooked), [
    'chain forward hooks filter forward 10, not filter forward 0',
    'chain v4_a hooks filter prerouting -150, not regular',
  ]);
  const reordered = model();
  reordered.chains.set('v4_a', { rules: ['counter', 'meta l4proto tcp th dport 80 accept'] });
  t.same(tableDiff(model(), reordered), [
    'chain v4_a has rules [counter; meta l4proto tcp th dport 80 accept], not [meta l4proto tcp th dport 80 accept; counter]',
  ]);
});

t.test('maps: missing, extra, an element missing, extra or going elsewhere', async (t) => {
  const gone = model();
  gone.maps.delete('vips4');
  gone.maps.set('vips6', { key: 'ipv6_addr', elements: new Map() });
  t.same(tableDiff(model(), gone), ['map vips4 is missing', 'map vips6 should not exist']);
  const have = model();
  have.maps.set('vips4', {
    key: 'ipv4_addr',
    elements: new Map([
      ['10.96.0.1', 'v4_b'],
      ['10.96.0.2', 'v4_a'],
    ]),
  });
  t.same(tableDiff(model(), have), [
    'map vips4: 10.96.0.1 goes to v4_b, not v4_a',
    'map vips4 has 10.96.0.2, which it should not',
  ]);
  const lacking = model();
  lacking.maps.set('vips4', { key: 'ipv4_addr', elements: new Map() });
  t.same(tableDiff(model(), lacking), ['map vips4 lacks 10.96.0.1']);
});

t.test('sets: missing, extra, elements of a plain set; a counting set only by name', async (t) => {
  const have = model();
  have.sets.delete('seen4');
  have.sets.set('seen6', { key: 'ipv6_addr', dynamic: true, elements: new Map() });
  have.sets.set('long4', {
    key: 'ipv4_addr . inet_proto . inet_service',
    dynamic: false,
    elements: new Map([['10.96.0.1 . udp . 80', 0]]),
  });
  t.same(tableDiff(model(), have), [
    'set seen4 is missing',
    'set seen6 should not exist',
    'set long4 lacks 10.96.0.1 . tcp . 80',
    'set long4 has 10.96.0.1 . udp . 80, which it should not',
  ]);
});

t.test('ct timeouts: missing, extra, another policy; states left out are the kernel defaults', async (t) => {
  const have = model();
  have.ctTimeouts.delete('c4_x');
  have.ctTimeouts.set('c4_y', udp5);
  t.same(tableDiff(model(), have), ['ct timeout c4_x is missing', 'ct timeout c4_y should not exist']);
  const differ = (spec: TimeoutSpec) => {
    const m = model();
    m.ctTimeouts.set('c4_x', spec);
    return tableDiff(model(), m);
  };
  t.same(differ({ ...udp5, policy: { unreplied: 5 } }).length, 1, 'replied left out means 120 s, not 5 s');
  t.same(differ({ ...udp5, protocol: 'tcp' }).length, 1, 'another protocol');
  t.same(differ({ ...udp5, l3proto: 'ip6' }).length, 1, 'another family');
  t.same(differ({ ...udp5 }), [], 'the same policy');
  t.same(
    differ({ ...udp5, policy: { unreplied: 5, replied: 5, extra: 1 } }).length,
    1,
    'a state with no kernel default',
  );
  t.same(differ({ ...udp5, policy: { replied: 5, unreplied: 6 } }), [
    `ct timeout c4_x is ${JSON.stringify({ ...udp5, policy: { replied: 5, unreplied: 6 } })}, not ${JSON.stringify(udp5)}`,
  ]);
  const want = model();
  want.ctTimeouts.set('c4_x', { protocol: 'tcp', l3proto: 'ip', policy: { close: 5, time_wait: 5 } });
  const listed = model();
  listed.ctTimeouts.set('c4_x', {
    protocol: 'tcp',
    l3proto: 'ip',
    policy: { established: 432000, close: 5, time_wait: 5, syn_sent: 120 },
  });
  t.same(tableDiff(want, listed), [], 'a listing that shows default states equals a policy without them');
});

t.test('counters: one that should not exist', async (t) => {
  const have = model();
  have.counters.add('stray');
  t.same(tableDiff(model(), have), ['counter stray should not exist']);
});

t.test('flowtables: missing, extra, other devices; with subset, fewer devices are fine', async (t) => {
  const have = model();
  have.flowtables.delete('fastpath');
  have.flowtables.set('other', { devices: new Set(), handle: 2 });
  t.same(tableDiff(model(), have), ['flowtable fastpath is missing', 'flowtable other should not exist']);
  const fewer = model();
  fewer.flowtables.set('fastpath', { devices: new Set(['eth1']), handle: 1 });
  t.same(tableDiff(model(), fewer), ['flowtable fastpath has devices [eth1], not [eth0, eth1]']);
  t.same(tableDiff(model(), fewer, { devices: 'subset' }), [], 'subset: a device the kernel dropped');
  t.same(tableDiff(model(), fewer, { devices: 'exact' }).length, 1);
  const more = model();
  more.flowtables.set('fastpath', { devices: new Set(['eth2', 'eth0', 'eth1']), handle: 1 });
  t.same(tableDiff(model(), more, { devices: 'subset' }), [
    'flowtable fastpath has devices [eth0, eth1, eth2], not [eth0, eth1]',
  ]);
});

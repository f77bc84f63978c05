/** Each op as one line of `nft -f` input, written out here in nft's syntax. */
import t from 'tap';
import { familyOfName } from '../../../agent/nft/names.ts';
import { add, del, flush, opText, toText } from '../../../agent/nft/transaction.ts';

t.test('chains: base chains with their hook and priority when added, by name otherwise', async (t) => {
  const base = (priority: number) => add({ type: 'chain', name: 'c', base: { hook: 'forward', priority } });
  t.equal(opText(base(0)), 'add chain inet flowhint c { type filter hook forward priority filter; policy accept; }');
  t.equal(
    opText(base(5)),
    'add chain inet flowhint c { type filter hook forward priority filter + 5; policy accept; }',
  );
  t.equal(opText(base(-150)), 'add chain inet flowhint c { type filter hook forward priority -150; policy accept; }');
  t.equal(
    opText(add({ type: 'chain', name: 'n', base: { type: 'nat', hook: 'prerouting', priority: -110 } })),
    'add chain inet flowhint n { type nat hook prerouting priority -110; policy accept; }',
  );
  t.equal(
    opText(del({ type: 'chain', name: 'c', base: { hook: 'forward', priority: 0 } })),
    'delete chain inet flowhint c',
  );
  t.equal(opText(flush({ type: 'chain', name: 'c' })), 'flush chain inet flowhint c');
  t.equal(opText(add({ type: 'chain', name: 'v4_a' })), 'add chain inet flowhint v4_a');
});

t.test('elements, timeouts, sets, maps, flowtables, counters', async (t) => {
  t.equal(
    opText(add({ type: 'element', set: 'vips4', key: ['10.0.0.1'], goto: 'v4_a' })),
    'add element inet flowhint vips4 { 10.0.0.1 : goto v4_a }',
  );
  t.equal(
    opText(del({ type: 'element', set: 'vips4', key: ['10.0.0.1'], goto: 'v4_a' })),
    'delete element inet flowhint vips4 { 10.0.0.1 }',
    'a deleted element is named by its key alone',
  );
  t.equal(
    opText(add({ type: 'element', set: 'long4', key: ['10.0.0.1', 'tcp', '80'] })),
    'add element ip flowhint long4 { 10.0.0.1 . tcp . 80 }',
  );
  t.equal(
    opText(
      add({
        type: 'ct timeout',
        name: 'c4_x',
        spec: { protocol: 'udp', l3proto: 'ip', policy: { unreplied: 5, replied: 5 } },
      }),
    ),
    'add ct timeout ip flowhint c4_x { protocol udp; l3proto ip; policy = { unreplied : 5, replied : 5 }; }',
  );
  t.equal(opText(del({ type: 'ct timeout', name: 'c4_x' })), 'delete ct timeout ip flowhint c4_x');
  t.throws(() => opText(add({ type: 'ct timeout', name: 'c4_x' })), {
    message: /^cannot add ct timeout c4_x without its/,
  });
  t.equal(opText(add({ type: 'set', name: 's', key: 'ipv4_addr' })), 'add set inet flowhint s { type ipv4_addr; }');
  t.equal(
    opText(add({ type: 'set', name: 'seen4', key: 'ipv4_addr', size: 65535 })),
    'add set inet flowhint seen4 { type ipv4_addr; size 65535; flags dynamic; counter; }',
  );
  t.equal(
    opText(add({ type: 'map', name: 'm', key: 'ipv4_addr' })),
    'add map inet flowhint m { type ipv4_addr : verdict; }',
  );
  t.equal(opText(flush({ type: 'map', name: 'm' })), 'flush map inet flowhint m');
  t.equal(
    opText(add({ type: 'flowtable', name: 'f', devices: ['eth0', 'eth1'], counter: true })),
    'add flowtable inet flowhint f { hook ingress priority filter; devices = { "eth0", "eth1" }; counter; }',
  );
  t.equal(
    opText(del({ type: 'flowtable', name: 'f', devices: ['eth1'] })),
    'delete flowtable inet flowhint f { devices = { "eth1" }; }',
  );
  t.equal(opText(del({ type: 'flowtable', name: 'f' })), 'delete flowtable inet flowhint f');
  t.equal(opText(add({ type: 'counter', name: 'n' })), 'add counter inet flowhint n');
  t.equal(opText(add({ type: 'rule', chain: 'c', rule: 'counter' }), 'probe'), 'add rule inet probe c counter');
  t.equal(toText([]), '');
  t.equal(
    toText([add({ type: 'table' }), del({ type: 'table' })]),
    'add table inet flowhint\ndelete table inet flowhint\n',
  );
});

t.test('each object goes to its family table by its name; tables by their own family', async (t) => {
  const expected: Array<[string, string]> = [
    ['new_pre4', 'ip'],
    ['new_out4', 'ip'],
    ['long4', 'ip'],
    ['short4', 'ip'],
    ['s4_0123456789abcdef', 'ip'],
    ['c4_0123456789abcdef', 'ip'],
    ['new_pre6', 'ip6'],
    ['new_out6', 'ip6'],
    ['long6', 'ip6'],
    ['short6', 'ip6'],
    ['s6_0123456789abcdef', 'ip6'],
    ['c6_0123456789abcdef', 'ip6'],
    // The forward path and the flowtable stay in inet, as does anything unknown (an old layout's).
    ['fastpath', 'inet'],
    ['classify', 'inet'],
    ['hinted', 'inet'],
    ['vips4', 'inet'],
    ['seen6', 'inet'],
    ['v4_0123456789abcdef', 'inet'],
    ['new_pre', 'inet'],
    ['long', 'inet'],
    ['long46', 'inet'],
    ['xlong4', 'inet'],
    ['s4', 'inet'],
    ['xs4_0123456789abcdef', 'inet'],
  ];
  t.same(
    expected.map(([name]) => [name, familyOfName(name)]),
    expected,
  );
  t.equal(opText(add({ type: 'rule', chain: 'new_pre6', rule: 'accept' })), 'add rule ip6 flowhint new_pre6 accept');
  t.equal(opText(add({ type: 'table', family: 'ip6' })), 'add table ip6 flowhint');
  t.equal(opText(del({ type: 'table' })), 'delete table inet flowhint');
  t.equal(
    opText(flush({ type: 'chain', name: 's6_0123456789abcdef' })),
    'flush chain ip6 flowhint s6_0123456789abcdef',
  );
});

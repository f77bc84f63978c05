/**
 * The in-memory nft (applyTransaction), op by op: what each op does to a table, and for each
 * op nft refuses, the refusal in nft's words (written out here) with the table untouched.
 */
import t from 'tap';
import { applyTransaction, type TableModel } from '../../../agent/nft/table-model.ts';
import { add, del, flush, type Op, type TimeoutSpec } from '../../../agent/nft/transaction.ts';

const udp5: TimeoutSpec = { protocol: 'udp', l3proto: 'ip', policy: { unreplied: 5, replied: 5 } };

/** A table with one of everything: chains c and d, map m, sets s and seen, ct timeout ct1, flowtable ft, counter n. */
const SETUP: Op[] = [
  add({ type: 'table' }),
  add({ type: 'flowtable', name: 'ft', devices: ['eth0'] }),
  add({ type: 'chain', name: 'c' }),
  add({ type: 'chain', name: 'd' }),
  add({ type: 'map', name: 'm', key: 'ipv4_addr' }),
  add({ type: 'set', name: 's', key: 'ipv4_addr . inet_proto . inet_service' }),
  add({ type: 'set', name: 'seen', key: 'ipv4_addr', size: 100 }),
  add({ type: 'ct timeout', name: 'ct1', spec: udp5 }),
  add({ type: 'counter', name: 'n' }),
];
const devices = new Set(['eth0', 'eth1']);
const setup = () => applyTransaction(undefined, SETUP, { devices })!;
const apply = (table: TableModel | undefined, ...ops: Op[]) => applyTransaction(table, ops, { devices });

t.test('the set-up table', async (t) => {
  const m = setup();
  t.same(
    [...m.flowtables].map(([k, v]) => [k, [...v.devices], v.handle]),
    [['ft', ['eth0'], 1]],
  );
  t.same([...m.chains.keys()], ['c', 'd']);
  t.same(m.chains.get('c'), { base: undefined, rules: [] });
  t.same(
    [...m.sets].map(([k, v]) => [k, v.key, v.dynamic]),
    [
      ['s', 'ipv4_addr . inet_proto . inet_service', false],
      ['seen', 'ipv4_addr', true],
    ],
  );
  t.same(m.maps.get('m'), { key: 'ipv4_addr', elements: new Map() });
  t.same(m.ctTimeouts.get('ct1'), udp5);
  t.same([...m.counters], ['n']);
  t.equal(m.nextHandle, 2);
});

t.test('what ops do', async (t) => {
  const m = setup();
  t.same(apply(m, add({ type: 'table' })), m, 'adding the table again changes nothing');
  const ft2 = apply(
    m,
    add({ type: 'flowtable', name: 'ft2' }),
    add({ type: 'flowtable', name: 'ft', devices: ['eth1'] }),
  )!;
  t.same(
    [...ft2.flowtables].map(([k, v]) => [k, [...v.devices].sort(), v.handle]),
    [
      ['ft', ['eth0', 'eth1'], 1],
      ['ft2', [], 2],
    ],
  );
  t.equal(ft2.nextHandle, 3, 'each new flowtable a new handle');
  t.same(
    [...apply(ft2, del({ type: 'flowtable', name: 'ft', devices: ['eth0'] }))!.flowtables.get('ft')!.devices],
    ['eth1'],
  );
  t.notOk(apply(m, del({ type: 'flowtable', name: 'ft' }))!.flowtables.has('ft'));

  const withRules = apply(
    m,
    add({ type: 'rule', chain: 'c', rule: 'ip daddr @m counter' }),
    add({ type: 'rule', chain: 'c', rule: 'goto d' }),
    add({ type: 'element', set: 'm', key: ['10.0.0.1'], goto: 'd' }),
    add({ type: 'element', set: 'm', key: ['10.0.0.1'], goto: 'd' }),
    add({ type: 'element', set: 's', key: ['10.0.0.1', 'tcp', '80'] }),
    add({ type: 'chain', name: 'c' }),
  )!;
  t.same(
    withRules.chains.get('c')?.rules,
    ['ip daddr @m counter', 'goto d'],
    'rules in order; adding a chain again keeps them',
  );
  t.same([...withRules.maps.get('m')!.elements], [['10.0.0.1', 'd']], 'the same element twice is one');
  t.same([...withRules.sets.get('s')!.elements], [['10.0.0.1 . tcp . 80', 0]]);
  t.same(apply(withRules, flush({ type: 'chain', name: 'c' }))!.chains.get('c')?.rules, []);
  t.same([...apply(withRules, flush({ type: 'map', name: 'm' }))!.maps.get('m')!.elements], []);
  t.same(
    [...apply(withRules, del({ type: 'element', set: 's', key: ['10.0.0.1', 'tcp', '80'] }))!.sets.get('s')!.elements],
    [],
  );

  const flushed = apply(withRules, flush({ type: 'table' }))!;
  t.same(
    [...flushed.chains].map(([k, v]) => [k, v.rules]),
    [
      ['c', []],
      ['d', []],
    ],
    'flush table: every chain empty',
  );
  t.same([...flushed.maps.get('m')!.elements], [['10.0.0.1', 'd']], 'and the rest kept');
  t.equal(apply(withRules, del({ type: 'table' })), undefined, 'delete table: gone');
  const again = apply(ft2, del({ type: 'table' }), add({ type: 'table' }), add({ type: 'flowtable', name: 'x' }))!;
  t.equal(
    again.flowtables.get('x')?.handle,
    3,
    'in one transaction, a handle is not reused after the table is deleted',
  );
  t.same([...again.chains.keys()], [], 'and the new table is empty');

  const kept = apply(m, add({ type: 'ct timeout', name: 'ct1', spec: { ...udp5, policy: { unreplied: 9 } } }))!;
  t.same(kept.ctTimeouts.get('ct1'), udp5, 'adding an existing ct timeout keeps it');
  t.notOk(apply(m, del({ type: 'ct timeout', name: 'ct1' }))!.ctTimeouts.has('ct1'));
  t.same([...apply(m, del({ type: 'counter', name: 'n' }))!.counters], []);
  t.same([...apply(m, add({ type: 'counter', name: 'k' }))!.counters].sort(), ['k', 'n']);
  t.notOk(apply(m, del({ type: 'set', name: 's' }))!.sets.has('s'));
  t.notOk(apply(m, del({ type: 'chain', name: 'd' }))!.chains.has('d'));
  const readd = apply(
    withRules,
    add({ type: 'map', name: 'm', key: 'ipv4_addr' }),
    add({ type: 'set', name: 's', key: 'ipv4_addr . inet_proto . inet_service' }),
    add({ type: 'flowtable', name: 'ft' }),
  )!;
  t.same([...readd.maps.get('m')!.elements], [['10.0.0.1', 'd']], 'adding an existing map keeps its elements');
  t.same([...readd.sets.get('s')!.elements], [['10.0.0.1 . tcp . 80', 0]], 'and a set');
  t.same([...readd.flowtables.get('ft')!.devices], ['eth0'], 'and a flowtable its devices');
  const twoMaps = apply(
    m,
    add({ type: 'map', name: 'm6', key: 'ipv6_addr' }),
    add({ type: 'element', set: 'm', key: ['10.0.0.1'], goto: 'd' }),
  )!;
  t.throws(
    () => apply(twoMaps, del({ type: 'chain', name: 'd' })),
    { message: /an element jumps to it/ },
    'one map of two',
  );
  const base = apply(m, add({ type: 'chain', name: 'b', base: { type: 'filter', hook: 'forward', priority: 0 } }))!;
  t.same(base.chains.get('b')?.base, { type: 'filter', hook: 'forward', priority: 0 });
});

t.test('what nft refuses, in its words; a refused transaction changes nothing', async (t) => {
  const ENOENT = 'Error: Could not process rule: No such file or directory';
  const EBUSY = 'Error: Could not process rule: Device or resource busy';
  const referring = [
    add({ type: 'rule', chain: 'c', rule: 'ip daddr @s flow add @ft' }),
    add({ type: 'rule', chain: 'c', rule: 'ct timeout set "ct1"' }),
    add({ type: 'rule', chain: 'c', rule: 'goto d' }),
    add({ type: 'rule', chain: 'c', rule: 'ip saddr @m' }),
  ];
  const cases: Array<[string, TableModel | undefined, Op, string]> = [
    ['flush of no table', undefined, flush({ type: 'table' }), `${ENOENT} (no such table: flush table)`],
    ['delete of no table', undefined, del({ type: 'table' }), `${ENOENT} (no such table: delete table)`],
    ['a chain in no table', undefined, add({ type: 'chain', name: 'c' }), `${ENOENT} (no such table: add chain c)`],
    [
      'a missing device',
      setup(),
      add({ type: 'flowtable', name: 'ft', devices: ['eth9', 'eth1', 'eth8'] }),
      `${ENOENT} (no device eth9, eth8: add flowtable ft)`,
    ],
    [
      'no such flowtable',
      setup(),
      del({ type: 'flowtable', name: 'nope' }),
      `${ENOENT} (no such flowtable: delete flowtable nope)`,
    ],
    [
      'a device not in it',
      setup(),
      del({ type: 'flowtable', name: 'ft', devices: ['eth1'] }),
      `${ENOENT} (device eth1 not in the flowtable: delete flowtable ft)`,
    ],
    [
      'a flowtable a rule uses',
      apply(setup(), ...referring),
      del({ type: 'flowtable', name: 'ft' }),
      `${EBUSY} (a rule uses it: delete flowtable ft)`,
    ],
    ['no such chain', setup(), flush({ type: 'chain', name: 'x' }), `${ENOENT} (no such chain: flush chain x)`],
    [
      'a chain an element jumps to',
      apply(setup(), add({ type: 'element', set: 'm', key: ['10.0.0.1'], goto: 'd' })),
      del({ type: 'chain', name: 'd' }),
      `${EBUSY} (an element jumps to it: delete chain d)`,
    ],
    [
      'a chain a rule jumps to',
      apply(setup(), ...referring),
      del({ type: 'chain', name: 'd' }),
      `${EBUSY} (a rule jumps to it: delete chain d)`,
    ],
    ['no such map', setup(), flush({ type: 'map', name: 'x' }), `${ENOENT} (no such map: flush map x)`],
    ['no such set', setup(), del({ type: 'set', name: 'x' }), `${ENOENT} (no such set: delete set x)`],
    [
      'a set a rule uses',
      apply(setup(), ...referring),
      del({ type: 'set', name: 's' }),
      `${EBUSY} (a rule uses it: delete set s)`,
    ],
    [
      'a map a rule uses',
      apply(setup(), ...referring),
      del({ type: 'map', name: 'm' }),
      `${EBUSY} (a rule uses it: delete map m)`,
    ],
    [
      'a rule in no chain',
      setup(),
      add({ type: 'rule', chain: 'x', rule: 'counter' }),
      `${ENOENT} (no such chain: add rule)`,
    ],
    [
      'a rule naming no set',
      setup(),
      add({ type: 'rule', chain: 'c', rule: 'ip daddr @x' }),
      `${ENOENT} (no set, map or flowtable x: add rule)`,
    ],
    [
      'a rule naming no timeout',
      setup(),
      add({ type: 'rule', chain: 'c', rule: 'ct timeout set "ct9"' }),
      `${ENOENT} (no ct timeout ct9: add rule)`,
    ],
    [
      'a rule going to no chain',
      setup(),
      add({ type: 'rule', chain: 'c', rule: 'goto x_1' }),
      `${ENOENT} (no chain x_1: add rule)`,
    ],
    [
      'a rule deleted without a handle',
      setup(),
      del({ type: 'rule', chain: 'c', rule: 'counter' }),
      `${ENOENT} (rules are deleted by handle, which this model does not use: delete rule)`,
    ],
    [
      'an element of no set',
      setup(),
      add({ type: 'element', set: 'x', key: ['1'] }),
      `${ENOENT} (no such set or map: add element)`,
    ],
    [
      'a key of the wrong shape',
      setup(),
      add({ type: 'element', set: 's', key: ['10.0.0.1', 'tcp'] }),
      `${ENOENT} (key 10.0.0.1 . tcp does not fit ipv4_addr . inet_proto . inet_service: add element)`,
    ],
    [
      'no such element',
      setup(),
      del({ type: 'element', set: 's', key: ['10.0.0.1', 'tcp', '81'] }),
      `${ENOENT} (no element 10.0.0.1 . tcp . 81: delete element)`,
    ],
    [
      'a map element without goto',
      setup(),
      add({ type: 'element', set: 'm', key: ['10.0.0.1'] }),
      `${ENOENT} (no chain (none): add element)`,
    ],
    [
      'a map element to no chain',
      setup(),
      add({ type: 'element', set: 'm', key: ['10.0.0.1'], goto: 'x' }),
      `${ENOENT} (no chain x: add element)`,
    ],
    [
      'an element re-added elsewhere',
      apply(setup(), add({ type: 'element', set: 'm', key: ['10.0.0.1'], goto: 'd' })),
      add({ type: 'element', set: 'm', key: ['10.0.0.1'], goto: 'c' }),
      'Error: Could not process rule: File exists (element 10.0.0.1 goes to d: add element)',
    ],
    [
      'no such ct timeout',
      setup(),
      del({ type: 'ct timeout', name: 'x' }),
      `${ENOENT} (no such ct timeout: delete ct timeout x)`,
    ],
    [
      'a ct timeout a rule uses',
      apply(setup(), ...referring),
      del({ type: 'ct timeout', name: 'ct1' }),
      `${EBUSY} (a rule uses it: delete ct timeout ct1)`,
    ],
    ['no such counter', setup(), del({ type: 'counter', name: 'x' }), `${ENOENT} (no such counter: delete counter x)`],
  ];
  for (const [name, before, op, message] of cases) {
    const snapshot = JSON.stringify(before, (_k, v: unknown) => (v instanceof Map || v instanceof Set ? [...v] : v));
    let error: unknown;
    try {
      applyTransaction(before, [add({ type: 'counter', name: 'first' }), op].slice(before ? 0 : 1), { devices });
    } catch (e) {
      error = e;
    }
    t.match(error, { name: 'TransactionError', message }, name);
    t.equal(error instanceof Error && error.message, message, `${name}: exactly`);
    t.equal(
      JSON.stringify(before, (_k, v: unknown) => (v instanceof Map || v instanceof Set ? [...v] : v)),
      snapshot,
      `${name}: the table is untouched`,
    );
  }
});

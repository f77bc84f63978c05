/**
 * The table model: real `nft -j` listings (test/fixtures/nft/, captured from nft 1.0.6) parse
 * into the same model that applying the transaction in memory gives, so one comparison
 * serves the real kernel and the fake; content differences are named; the in-memory apply
 * keeps nft's semantics (all or nothing, references, missing objects).
 */
import t from 'tap';
import { readFileSync } from 'node:fs';
import { drift, expectedTable } from '../../../agent/nft/drift.ts';
import { fullTransaction } from '../../../agent/nft/render.ts';
import { mergeModels, parseListing } from '../../../agent/nft/nft.ts';
import { applyTransaction, type TableModel } from '../../../agent/nft/table-model.ts';
import { tableDiff } from '../../../agent/nft/table-diff.ts';
import { FAMILIES, type Op } from '../../../agent/nft/transaction.ts';
import { FIXTURE_OPTIONS, fixtureState } from '../../fixtures/nft/render-fixture.ts';

const fixture = (name: string) => readFileSync(new URL(`../../fixtures/nft/${name}`, import.meta.url), 'utf8');

const state = fixtureState;
const degraded = FIXTURE_OPTIONS.degraded;
const withFlowtable = FIXTURE_OPTIONS.flowtable;

type Listing = { nftables: Array<Record<string, Record<string, unknown>>> };

/** A fixture's three listings (one per table, keyed by family) as one model, as nft.ts reads them. */
function tables(json: string): TableModel | undefined {
  const doc = JSON.parse(json) as Record<string, Listing>;
  return mergeModels(FAMILIES.map((f) => parseListing(JSON.stringify(doc[f]), f)));
}

/** The fixture's JSON, edited by `edit` (one object of any of its listings). */
function tampered(name: string, edit: (o: Record<string, Record<string, unknown>>) => void): string {
  const doc = JSON.parse(fixture(name)) as Record<string, Listing>;
  for (const listing of Object.values(doc)) for (const o of listing.nftables) edit(o);
  return JSON.stringify(doc);
}

t.test('real listings parse into the model the transaction gives in memory', async (t) => {
  t.same(drift(tables(fixture('listing-degraded.json')), state(), degraded), [], 'degraded (host kernel)');
  t.same(drift(tables(fixture('listing-flowtable.json')), state(), withFlowtable), [], 'with a flowtable (VM kernel)');
  t.not(
    drift(tables(fixture('listing-degraded.json')), state(), withFlowtable).length,
    0,
    'but not the other way round',
  );
});

t.test('parseListing: the model of a real listing', async (t) => {
  const r = tables(fixture('listing-flowtable.json'));
  if (!r) throw new Error('no tables');
  t.same([...r.tables].sort(), ['inet', 'ip', 'ip6'], 'three tables');
  t.equal(r.misplaced, undefined, 'every object in its own table');
  t.same([...(r.flowtables.get('fastpath')?.devices ?? [])], ['fhv0'], 'one device, printed as a string');
  t.same([...r.sets.keys()].sort(), ['long4', 'long6', 'seen4', 'seen6']);
  t.same([...r.maps.keys()].sort(), ['short4', 'short6', 'vips4', 'vips6']);
  t.equal(r.maps.get('short4')?.elements.size, 2);
  t.same(r.ctTimeouts.size, 4);
  t.same(
    r.chains.get('classify'),
    { base: { hook: 'forward', priority: 10 }, rules: ['ct mark & 12288 == 8192 ct packets > 20 goto hinted'] },
    'one rule per forwarded packet: the mark, then the lowest threshold in use',
  );
  t.same(r.chains.get('hinted'), {
    rules: [
      'ct state established ct status dnat ct original ip daddr vmap @vips4',
      'ct state established ct status dnat ct original ip6 daddr vmap @vips6',
    ],
  });
  t.same(
    [r.chains.get('new_pre4'), r.chains.get('new_pre6')],
    [
      {
        base: { type: 'nat', hook: 'prerouting', priority: -110 },
        rules: [
          'ip daddr . meta l4proto . th dport @long4 ct mark set ct mark | 8192',
          'ip daddr . meta l4proto . th dport vmap @short4',
        ],
      },
      {
        base: { type: 'nat', hook: 'prerouting', priority: -110 },
        rules: [
          'ip6 daddr . meta l4proto . th dport @long6 ct mark set ct mark | 8192',
          'ip6 daddr . meta l4proto . th dport vmap @short6',
        ],
      },
    ],
    "a NAT chain per family, in its own table, before kube-proxy's DNAT",
  );
  t.same(r.chains.get('new_out4')?.base, { type: 'nat', hook: 'output', priority: -110 });
  t.same(r.chains.get('new_out6')?.base, { type: 'nat', hook: 'output', priority: -110 });
  t.same(
    [...(r.sets.get('long4')?.elements.keys() ?? [])].sort(),
    ['10.96.0.10 . tcp . 80', '10.96.0.10 . udp . 53'],
    'the LongLived ports, concatenated',
  );
  t.equal(r.sets.get('long4')?.dynamic, false);
  t.equal(r.sets.get('seen4')?.dynamic, true, 'the counting sets are dynamic');
  t.same(r.maps.get('short4')?.elements.get('10.96.0.53 . udp . 53')?.slice(0, 3), 's4_');
  const rule = [...r.chains.values()].flatMap((c) => c.rules).find((x) => x.includes('proto-dst 80'));
  t.equal(
    rule,
    'meta l4proto tcp ct original proto-dst 80 ct packets > 20 fib saddr . iif oif exists update @seen4 { ct original ip daddr } flow add @fastpath',
    'a rule reads back in nft words',
  );
  const seen = parseListing(
    JSON.stringify({
      nftables: [
        {
          set: {
            name: 'seen4',
            type: 'ipv4_addr',
            elem: [{ elem: { val: '10.96.0.10', counter: { packets: 7, bytes: 1 } } }, '10.96.0.11'],
          },
        },
      ],
    }),
  );
  t.same(
    [...(seen.sets.get('seen4')?.elements ?? [])],
    [
      ['10.96.0.10', 7],
      ['10.96.0.11', 0],
    ],
    'counting-set elements and their counters',
  );
  t.throws(() => parseListing('{"nftables": [{"chain": {"name": 5}}]}'), 'a listing of the wrong shape is refused');
});

t.test('content differences are named', async (t) => {
  const diffOf = (edit: (o: Record<string, Record<string, unknown>>) => void) =>
    drift(tables(tampered('listing-flowtable.json', edit)), state(), withFlowtable);
  const rules = (o: Record<string, Record<string, unknown>>) =>
    (o.rule?.expr ?? []) as Array<Record<string, Record<string, unknown>>>;
  t.match(
    diffOf((o) => rules(o).forEach((s) => s.match?.right === 80 && (s.match.right = 8080))),
    [/rules \[.*proto-dst 8080/],
    'a port',
  );
  t.match(
    diffOf((o) => rules(o).forEach((s) => s.match?.right === 20 && (s.match.right = 21))),
    [/ct packets > 21/],
    'a threshold',
  );
  t.match(
    diffOf((o) => o.rule && (o.rule.expr = rules(o).filter((s) => !s.flow))),
    [/rules/],
    'a missing flow add',
  );
  t.match(
    diffOf((o) => o.flowtable && (o.flowtable.dev = ['fhv0', 'eth9'])),
    [/flowtable fastpath has devices \[eth9, fhv0\]/],
    'a device added by someone else',
  );
  t.same(
    diffOf((o) => o.flowtable && delete o.flowtable.dev),
    [],
    'a device the kernel dropped (it vanished) is not drift',
  );
  t.match(
    diffOf((o) => o['ct timeout'] && (o['ct timeout'].policy = { unreplied: 6, replied: 5 })),
    [/ct timeout c/],
    'a timeout policy',
  );
  t.match(
    diffOf(
      (o) =>
        o.map?.name === 'vips4' &&
        (o.map.elem as unknown[]).push(['10.1.1.1', { goto: { target: 'v4_008fabfb70b40779' } }]),
    ),
    ['map vips4 has 10.1.1.1, which it should not'],
  );
  t.match(
    diffOf((o) => o.map?.name === 'short4' && (o.map.elem = [])),
    [/map short4 lacks 10\.96\.0\.53 \. tcp \. 53/, /lacks/],
  );
  t.match(
    diffOf((o) => o.chain?.name === 'classify' && (o.chain.prio = 0)),
    [/chain classify hooks filter forward 0, not filter forward 10/],
  );
  t.match(
    diffOf((o) => o.chain?.name === 'new_pre4' && (o.chain.type = 'filter')),
    [/chain new_pre4 hooks filter prerouting -110, not nat prerouting -110/],
    'a NAT chain become a filter chain',
  );
  t.match(
    diffOf((o) => o.set?.name === 'long4' && (o.set.elem = (o.set.elem as unknown[]).slice(1))),
    [/set long4 lacks 10\.96\.0\.10 \. /],
    'a missing mark element',
  );
  t.match(
    diffOf((o) => o.set?.name === 'long6' && (o.set.elem as unknown[]).push({ concat: ['fd00::99', 'tcp', 22] })),
    ['set long6 has fd00::99 . tcp . 22, which it should not'],
  );
  t.match(
    diffOf((o) => rules(o).forEach((s) => s.match?.right === 8192 && (s.match.right = 8193))),
    [/chain classify has rules \[ct mark & 12288 == 8193 ct packets > 20 goto hinted\]/],
    'a changed mark test',
  );
  t.match(
    diffOf((o) => rules(o).push({ counter: { packets: 0, bytes: 0 } })),
    [/rules/],
    'an extra statement we do not write',
  );
});

t.test('timeout policies: nft leaves out states at the kernel default, which is not drift', async (t) => {
  const two = (policy: Record<string, number>, listed: Record<string, number>) =>
    tableDiff(model({ ct: policy }), model({ ct: listed }));
  const model = (o: { ct: Record<string, number> }): TableModel =>
    applyTransaction(undefined, [
      { verb: 'add', obj: { type: 'table' } },
      { verb: 'add', obj: { type: 'ct timeout', name: 'c', spec: { protocol: 'udp', l3proto: 'ip', policy: o.ct } } },
    ])!;
  t.same(two({ unreplied: 120, replied: 120 }, { unreplied: 120 }), [], "replied 120 s is UDP's default");
  t.not(two({ unreplied: 120, replied: 60 }, { unreplied: 120 }).length, 0, 'replied 60 s is not');
});

const add = (obj: Op['obj']): Op => ({ verb: 'add', obj });
const del = (obj: Op['obj']): Op => ({ verb: 'delete', obj });
const base: Op[] = [
  add({ type: 'table' }),
  add({ type: 'map', name: 'm', key: 'ipv4_addr' }),
  add({ type: 'set', name: 's', key: 'ipv4_addr', size: 8 }),
  add({ type: 'chain', name: 'c' }),
  add({ type: 'rule', chain: 'c', rule: 'update @s { ip daddr }' }),
];

t.test('applyTransaction keeps nft semantics', async (t) => {
  const m = applyTransaction(undefined, [...base, add({ type: 'element', set: 'm', key: ['10.0.0.1'], goto: 'c' })])!;
  const refused = (tx: Op[], why: RegExp, what: string) => t.throws(() => applyTransaction(m, tx), why, what);
  refused(
    [add({ type: 'element', set: 'm', key: ['10.0.0.2'], goto: 'nope' })],
    /No such file or directory/,
    'a goto to a missing chain',
  );
  refused(
    [del({ type: 'element', set: 'm', key: ['10.9.9.9'] })],
    /No such file or directory/,
    'deleting a missing element',
  );
  refused([del({ type: 'chain', name: 'nope' })], /No such file or directory/, 'deleting a missing chain');
  refused([del({ type: 'chain', name: 'c' })], /Device or resource busy/, 'deleting a chain an element jumps to');
  refused([del({ type: 'set', name: 's' })], /Device or resource busy/, 'deleting a set a rule uses');
  refused(
    [add({ type: 'rule', chain: 'c', rule: 'update @nope { ip daddr }' })],
    /No such file or directory/,
    'a rule naming a missing set',
  );
  refused(
    [add({ type: 'chain', name: 'd' }), add({ type: 'element', set: 'm', key: ['10.0.0.1'], goto: 'd' })],
    /File exists/,
    're-adding an element with another verdict',
  );
  t.throws(
    () =>
      applyTransaction(m, [add({ type: 'flowtable', name: 'f', devices: ['eth9'] })], { devices: new Set(['eth0']) }),
    /No such file or directory/,
    'a flowtable naming a missing device',
  );
  t.throws(
    () => applyTransaction(undefined, [add({ type: 'chain', name: 'c' })]),
    /no such table/,
    'anything in a missing table',
  );

  const before = JSON.stringify([...m.chains]);
  t.throws(() => applyTransaction(m, [add({ type: 'chain', name: 'x' }), del({ type: 'chain', name: 'nope' })]));
  t.equal(JSON.stringify([...m.chains]), before, 'a failed transaction changed nothing, not even its first operations');

  const moved = applyTransaction(m, [
    del({ type: 'element', set: 'm', key: ['10.0.0.1'] }),
    del({ type: 'chain', name: 'c' }),
  ])!;
  t.notOk(moved.chains.has('c'), 'a chain goes with its rules once nothing jumps to it');
  t.equal(applyTransaction(m, [del({ type: 'table' })]), undefined, 'delete table');
  const ft = applyTransaction(m, [add({ type: 'flowtable', name: 'f', devices: ['a'] })])!;
  const again = applyTransaction(ft, [
    add({ type: 'flowtable', name: 'f', devices: ['b'] }),
    del({ type: 'flowtable', name: 'f', devices: ['a'] }),
  ])!;
  t.same([...again.flowtables.get('f')!.devices], ['b'], 'devices added and removed in place');
  t.equal(again.flowtables.get('f')!.handle, ft.flowtables.get('f')!.handle, 'the same flowtable');
  const recreated = applyTransaction(ft, [
    del({ type: 'flowtable', name: 'f' }),
    add({ type: 'flowtable', name: 'f', devices: ['a'] }),
  ])!;
  t.not(
    recreated.flowtables.get('f')!.handle,
    ft.flowtables.get('f')!.handle,
    'a recreated flowtable has a new handle',
  );
});

t.test('three tables: each object in its own, references never cross, a table goes alone', async (t) => {
  const m = applyTransaction(undefined, [
    ...base,
    add({ type: 'table', family: 'ip' }),
    add({ type: 'set', name: 'long4', key: 'ipv4_addr' }),
    add({ type: 'chain', name: 'new_pre4' }),
    add({ type: 'rule', chain: 'new_pre4', rule: 'ip daddr @long4 accept' }),
  ])!;
  t.same([...m.tables].sort(), ['inet', 'ip']);
  t.throws(
    () => applyTransaction(m, [add({ type: 'chain', name: 'new_pre6' })]),
    /no such table/,
    'an object of a table that does not exist',
  );
  t.throws(
    () => applyTransaction(m, [add({ type: 'rule', chain: 'new_pre4', rule: 'ip daddr @s accept' })]),
    /no set, map or flowtable s/,
    "a rule of the ip table naming the inet table's set",
  );
  t.throws(
    () => applyTransaction(m, [add({ type: 'rule', chain: 'c', rule: 'ip daddr @long4 accept' })]),
    /no set, map or flowtable long4/,
    'and the other way round',
  );
  t.throws(
    () =>
      applyTransaction(m, [
        add({ type: 'map', name: 'short4', key: 'ipv4_addr' }),
        add({ type: 'element', set: 'short4', key: ['10.0.0.1'], goto: 'c' }),
      ]),
    /no chain c/,
    "an element jumping to another table's chain",
  );
  const ipGone = applyTransaction(m, [del({ type: 'table', family: 'ip' })])!;
  t.same([...ipGone.tables], ['inet'], 'delete table ip');
  t.same([...ipGone.chains.keys()], ['c'], "the ip table's chains went with it, inet's stayed");
  t.same([...ipGone.sets.keys()], ['s']);
  const flushed = applyTransaction(m, [{ verb: 'flush', obj: { type: 'table', family: 'ip' } }])!;
  t.same(
    [flushed.chains.get('c')?.rules.length, flushed.chains.get('new_pre4')?.rules.length],
    [1, 0],
    "flush table ip empties only the ip table's chains",
  );
  t.equal(applyTransaction(ipGone, [del({ type: 'table' })]), undefined, 'no table left: undefined');
  const counted = applyTransaction(m, [add({ type: 'counter', name: 'old' })])!;
  t.same(
    [...applyTransaction(counted, [del({ type: 'table', family: 'ip' })])!.counters],
    ['old'],
    "inet's counter stays",
  );
  t.same([...applyTransaction(counted, [del({ type: 'table' })])!.counters], [], 'and goes with inet');
});

t.test('expectedTable is what a fresh transaction leaves', async (t) => {
  const m = expectedTable(state(), withFlowtable)!;
  t.same([...m.flowtables.get('fastpath')!.devices], ['fhv0']);
  t.equal(m.maps.get('vips4')?.elements.size, 1);
  t.equal(m.sets.get('seen4')?.elements.size, 0, 'counting sets start empty');
});

t.test('a table laid out by an older flowhint (one inet table) is made again in one transaction', async (t) => {
  // listing-one-table.json: the same state as rendered before issue 32, all in `inet flowhint`.
  const old = parseListing(fixture('listing-one-table.json'), 'inet');
  t.match(old.misplaced, [
    'c4_',
    'c4_',
    'c6_',
    'c6_',
    'long4',
    'long6',
    's4_',
    's4_',
    's6_',
    's6_',
    'short4',
    'short6',
  ]);
  t.notOk(old.misplaced?.includes('new_pre'), 'its NAT chains are just stale (no family in their names)');
  const tx = fullTransaction(state(), withFlowtable, old);
  t.same(
    tx.slice(0, 6).map((op) => `${op.verb} ${op.obj.type === 'table' ? (op.obj.family ?? 'inet') : op.obj.type}`),
    ['add inet', 'delete inet', 'add ip', 'delete ip', 'add ip6', 'delete ip6'],
    'every table of ours deleted first (add before delete: never fails on a missing one)',
  );
  const after = applyTransaction(old, tx, { devices: new Set(['fhv0']) });
  t.same(tableDiff(expectedTable(state(), withFlowtable), after), [], 'and then exactly what a fresh start makes');
  t.notOk(
    fullTransaction(state(), withFlowtable, tables(fixture('listing-flowtable.json'))).some(
      (op) => op.obj.type === 'table' && op.verb === 'delete',
    ),
    'a table in the current layout is never deleted',
  );
});

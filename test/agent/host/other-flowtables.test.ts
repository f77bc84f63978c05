import t from 'tap';
import { flowtableText, otherFlowtables, parseFlowtables } from '../../../agent/host/other-flowtables.ts';
import { StatusDoc, formatStatus } from '../../../agent/report/status.ts';

// `nft -j list flowtables` as nft 1.0.6 printed it in the VM (Debian's 6.1 kernel), for a
// kindnet-like table on a0 and a1, a Calico-like one on b0 at priority -10, and flowhint's
// own on all three. One device is printed as a string, several as an array.
const LISTING = `{"nftables": [{"metainfo": {"version": "1.0.6", "release_name": "Lester Gooch #5", "json_schema_version": 1}}, {"flowtable": {"family": "inet", "name": "fastpath", "table": "kindnet", "handle": 2, "hook": "ingress", "prio": 0, "dev": ["a0", "a1"]}}, {"flowtable": {"family": "ip", "name": "ft", "table": "calico", "handle": 1, "hook": "ingress", "prio": -10, "dev": "b0"}}, {"flowtable": {"family": "inet", "name": "fastpath", "table": "flowhint", "handle": 1, "hook": "ingress", "prio": 0, "dev": ["a0", "a1", "b0"]}}]}`;

t.test('parseFlowtables: every flowtable, one device or several', async (t) => {
  t.same(parseFlowtables(LISTING), [
    { table: 'inet kindnet', name: 'fastpath', priority: 0, devices: ['a0', 'a1'] },
    { table: 'ip calico', name: 'ft', priority: -10, devices: ['b0'] },
    { table: 'inet flowhint', name: 'fastpath', priority: 0, devices: ['a0', 'a1', 'b0'] },
  ]);
  t.same(parseFlowtables('{"nftables": [{"metainfo": {"version": "1.0.6"}}]}'), [], 'none: only the metainfo');
  t.same(
    parseFlowtables('{"nftables": [{"flowtable": {"family": "inet", "table": "x", "name": "f"}}]}'),
    [{ table: 'inet x', name: 'f', priority: null, devices: [] }],
    'no devices, no priority',
  );
  t.throws(() => parseFlowtables('{"tables": []}'), 'not a listing');
});

t.test('otherFlowtables: not ours, sharing a device, with only the shared devices', async (t) => {
  const all = parseFlowtables(LISTING);
  t.same(otherFlowtables(all, 'inet flowhint', ['a0', 'a1', 'b0']).map(flowtableText), [
    'inet kindnet/fastpath on a0, a1 (priority 0)',
    'ip calico/ft on b0 (priority -10)',
  ]);
  t.same(
    otherFlowtables(all, 'inet flowhint', ['a1']).map(flowtableText),
    ['inet kindnet/fastpath on a1 (priority 0)'],
    'only the devices flowhint uses',
  );
  t.same(otherFlowtables(all, 'inet flowhint', ['c0']), [], 'other devices: nothing to say');
  t.same(
    otherFlowtables(all, 'inet kindnet', ['a0', 'b0']).map((f) => f.table),
    ['inet flowhint', 'ip calico'],
    'ownership is by table, not by flowtable name',
  );
});

t.test('status: other flowtables are said in words; older documents have none', async (t) => {
  const base = {
    version: 1,
    pid: 1,
    updatedAt: '2026-12-03T00:00:00.000Z',
    node: { mode: 'supported', detail: 'ok', conntrackAccounting: { enabled: true, detail: 'on' }, nodeAddresses: [] },
    table: 'inet flowhint',
    devices: ['n0', 'n1'],
    services: [],
    invalid: [],
    lastSync: null,
  };
  const old = StatusDoc.parse(base);
  t.same(old.otherFlowtables, []);
  t.notMatch(formatStatus(old), /other flowtable/);
  const doc = StatusDoc.parse({
    ...base,
    otherFlowtables: [{ table: 'inet kindnet', name: 'fastpath', priority: 0, devices: ['n0', 'n1'] }],
  });
  t.match(
    formatStatus(doc),
    /^other flowtable: inet kindnet\/fastpath on n0, n1 \(priority 0\): another owner's flowtable on flowhint's devices: .*Services without a hint are offloaded too$/m,
  );
});

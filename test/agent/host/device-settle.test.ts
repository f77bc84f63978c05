/**
 * agent/host/device-settle.ts: which listed devices have stayed up long enough to join the
 * flowtable. Times are written out per step; the expectation at each is read from them.
 */
import t from 'tap';
import { DEFAULT_SETTLE_MS, DeviceSettle } from '../../../agent/host/device-settle.ts';

t.test('the first listing is settled; later devices wait settleMs, counted from their first listing', async (t) => {
  const s = new DeviceSettle(1_000);
  t.same(s.settled(['eth0', 'eth1'], 5_000), ['eth0', 'eth1'], 'present at start: not churn');
  t.same(s.settled(['eth0', 'veth1', 'eth1'], 6_000), ['eth0', 'eth1'], 'veth1 first seen at 6 000');
  t.same(s.waiting(6_000), ['veth1']);
  t.same(s.settled(['eth0', 'veth1', 'eth1'], 6_999), ['eth0', 'eth1'], '999 ms: not yet');
  t.same(s.settled(['eth0', 'veth1', 'eth1'], 7_000), ['eth0', 'veth1', 'eth1'], '1 000 ms: settled, in listing order');
  t.same(s.waiting(7_000), []);
});

t.test('a device missing from a listing is forgotten: back again, it waits again', async (t) => {
  const s = new DeviceSettle(1_000);
  s.settled(['eth0', 'veth1'], 0);
  t.same(s.settled(['eth0'], 10), ['eth0']);
  t.same(s.settled(['eth0', 'veth1'], 20), ['eth0'], 'back at 20: waits until 1 020');
  t.same(s.settled(['eth0', 'veth1'], 1_019), ['eth0']);
  t.same(s.settled(['eth0', 'veth1'], 1_020), ['eth0', 'veth1']);
});

t.test('settleMs 0 takes every device at once; the default is one second', async (t) => {
  const s = new DeviceSettle(0);
  s.settled([], 0);
  t.same(s.settled(['veth9'], 0), ['veth9']);
  t.equal(DEFAULT_SETTLE_MS, 1_000);
  const d = new DeviceSettle();
  d.settled([], 0);
  t.same(d.settled(['x'], 0), []);
  t.same(d.settled(['x'], 999), []);
  t.same(d.settled(['x'], 1_000), ['x']);
});

t.test('an empty first listing still counts as the first', async (t) => {
  const s = new DeviceSettle(1_000);
  t.same(s.settled([], 0), []);
  t.same(s.settled(['eth0'], 0), [], 'a device after an empty start waits');
});

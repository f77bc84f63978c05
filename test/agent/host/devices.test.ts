/** Device selection and node addresses from `ip -j` output (pure, and through a fake Runner). */
import t from 'tap';
import { isOperUp, listLinks, listNodeAddresses, selectDevices, type LinkInfo } from '../../../agent/host/devices.ts';
import type { Runner } from '../../../lib/exec.ts';

const link = (ifname: string, o: Partial<LinkInfo> = {}): LinkInfo => ({
  ifname,
  flags: ['BROADCAST', 'UP', 'LOWER_UP'],
  operstate: 'UP',
  link_type: 'ether',
  ...o,
});

t.test('oper-up, non-loopback interfaces; UNKNOWN counts when up with carrier', async (t) => {
  t.ok(isOperUp(link('eth0')));
  t.notOk(isOperUp(link('lo', { link_type: 'loopback', flags: ['LOOPBACK', 'UP'], operstate: 'UNKNOWN' })));
  t.notOk(isOperUp(link('eth1', { operstate: 'DOWN', flags: ['BROADCAST'] })));
  t.ok(isOperUp(link('tun0', { operstate: 'UNKNOWN', flags: ['POINTOPOINT', 'UP', 'LOWER_UP'] })), 'a tun device');
  t.notOk(isOperUp(link('dummy0', { operstate: 'UNKNOWN', flags: ['BROADCAST', 'UP'] })), 'no carrier');
});

t.test('include/exclude filters; unrenderable names are skipped and reported; sorted', async (t) => {
  const links = [
    link('veth9'),
    link('eth0'),
    link('lo', { link_type: 'loopback', flags: ['LOOPBACK', 'UP'] }),
    link('bad"name'),
    link('cali123'),
    link('x'.repeat(16)),
  ];
  t.same(selectDevices(links, {}), { devices: ['cali123', 'eth0', 'veth9'], skipped: ['bad"name', 'x'.repeat(16)] });
  t.same(selectDevices(links, { include: /^(eth|cali)/ }).devices, ['cali123', 'eth0']);
  t.same(selectDevices(links, { exclude: /^veth/ }).devices, ['cali123', 'eth0']);
});

const runner =
  (out: Record<string, string>, code = 0): Runner =>
  async (argv) => ({
    code,
    stdout: out[argv.slice(2).join(' ')] ?? '[]',
    stderr: code ? 'Cannot open netlink socket' : '',
  });

t.test('listLinks and listNodeAddresses read ip -j', async (t) => {
  const run = runner({
    'link show': JSON.stringify([
      { ifname: 'eth0', flags: ['UP', 'LOWER_UP'], operstate: 'UP', link_type: 'ether', mtu: 1500 },
    ]),
    'addr show': JSON.stringify([
      { ifname: 'lo', flags: ['LOOPBACK', 'UP'], addr_info: [{ family: 'inet', local: '127.0.0.1', scope: 'host' }] },
      {
        ifname: 'eth0',
        flags: ['UP'],
        addr_info: [
          { family: 'inet', local: '192.0.2.10', scope: 'global' },
          { family: 'inet6', local: 'fe80::1', scope: 'link' },
          { family: 'inet6', local: '2001:db8::10', scope: 'global' },
        ],
      },
      { ifname: 'eth1', flags: ['BROADCAST'], addr_info: [{ family: 'inet', local: '198.51.100.1', scope: 'global' }] },
    ]),
  });
  t.same(
    (await listLinks(run)).map((l) => l.ifname),
    ['eth0'],
  );
  t.same(
    (await listNodeAddresses(run)).map((a) => `${a.family} ${a.addr}`),
    ['ip 192.0.2.10', 'ip6 2001:db8::10'],
    'global addresses of up interfaces only',
  );
  await t.rejects(listLinks(runner({}, 1)), { code: 'FH_IP_FAILED' }, 'a failing ip says so, with a code');
});

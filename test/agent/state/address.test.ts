/** Addresses as they may reach nft text: canonical, or refused; and the hashes used as names. */
import t from 'tap';
import { addressKey, parseAddress, shortHash } from '../../../agent/state/address.ts';
import { isMarkBit } from '../../../agent/nft/names.ts';

t.test('addresses are canonical', async (t) => {
  t.same(parseAddress('10.96.0.10'), { family: 'ip', addr: '10.96.0.10' });
  t.same(parseAddress('FD00:0:0::0001'), { family: 'ip6', addr: 'fd00::1' }, 'RFC 5952: lower case, compressed');
  t.same(parseAddress('2001:db8:0:0:1:0:0:1'), { family: 'ip6', addr: '2001:db8::1:0:0:1' });
  t.same(parseAddress('::ffff:10.0.0.1'), { family: 'ip6', addr: '::ffff:a00:1' });
});

t.test('anything that is not a plain IP is refused', async (t) => {
  const bad = [
    '',
    '10.0.0.256',
    '10.96.0.010',
    '1.2.3',
    '0.0.0.0',
    '::',
    'fe80::1%eth0',
    '[::1]',
    'None',
    '10.96.0.10; flush ruleset',
    '10.96.0.10 }',
    '1.2.3.4\n',
    'fd00::1 ',
    'x'.repeat(46),
    'g::1',
    '1:2:3:4:5:6:7:8:9',
  ];
  for (const raw of bad) t.equal(parseAddress(raw), undefined, JSON.stringify(raw));
});

t.test('keys and hashes', async (t) => {
  t.equal(addressKey({ family: 'ip6', addr: 'fd00::1' }), 'ip6 fd00::1');
  t.match(shortHash('demo/web'), /^[0-9a-f]{16}$/);
  t.equal(shortHash('demo/web'), shortHash('demo/web'), 'stable');
  t.not(shortHash('demo/web'), shortHash('demo/web2'));
});

t.test('the conntrack mark bit: one of bits 0 to 30', async (t) => {
  const ok = [1, 2, 0x2000, 0x40000000];
  const bad = [0, 3, 0x6000, 0x80000000, -2, 1.5, 8192.5, Number.NaN, 2 ** 31, 2 ** 32];
  for (const n of ok) t.ok(isMarkBit(n), `0x${n.toString(16)}`);
  for (const n of bad) t.notOk(isMarkBit(n), String(n));
});

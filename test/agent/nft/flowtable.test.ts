/**
 * agent/nft/flowtable.ts: the flowtable's operations as nft text, written out here from the
 * devices given (what nft must be told), never from the module's own output.
 */
import t from 'tap';
import { deviceOps, flowtableOps, oneDeviceOps, recreateOps } from '../../../agent/nft/flowtable.ts';
import { toText } from '../../../agent/nft/transaction.ts';

const o = { flowtable: true, counter: true, devices: ['eth1', 'bad"x', 'eth0'] };

t.test('a new flowtable and a recreated one name only devices that can be rendered', async (t) => {
  t.equal(
    toText(flowtableOps(o, undefined).before),
    'add flowtable inet flowhint fastpath { hook ingress priority filter; devices = { "eth1", "eth0" }; counter; }\n',
  );
  t.equal(
    toText(recreateOps(o, ['v4_0123456789abcdef'])),
    [
      'flush chain inet flowhint v4_0123456789abcdef',
      'delete flowtable inet flowhint fastpath',
      'add flowtable inet flowhint fastpath { hook ingress priority filter; devices = { "eth1", "eth0" }; counter; }',
      '',
    ].join('\n'),
  );
});

t.test('device changes in place: removals then additions, each sorted, unrenderable names left alone', async (t) => {
  const current = ['veth9', 'eth0', 'bad"q', 'veth1'];
  const wanted = ['eth0', 'vethb', 'bad"x', 'vetha'];
  t.equal(
    toText(deviceOps(current, wanted)),
    [
      'delete flowtable inet flowhint fastpath { devices = { "veth1", "veth9" }; }',
      'add flowtable inet flowhint fastpath { hook ingress priority filter; devices = { "vetha", "vethb" }; }',
      '',
    ].join('\n'),
  );
  t.equal(
    toText(oneDeviceOps(current, wanted)),
    [
      'delete flowtable inet flowhint fastpath { devices = { "veth1" }; }',
      'delete flowtable inet flowhint fastpath { devices = { "veth9" }; }',
      'add flowtable inet flowhint fastpath { hook ingress priority filter; devices = { "vetha" }; }',
      'add flowtable inet flowhint fastpath { hook ingress priority filter; devices = { "vethb" }; }',
      '',
    ].join('\n'),
    'the same, one device per operation',
  );
  t.same(deviceOps(['eth0'], ['eth0']), [], 'nothing to change: no operation');
  t.same(oneDeviceOps(['eth0'], ['eth0', 'bad"x']), []);
});

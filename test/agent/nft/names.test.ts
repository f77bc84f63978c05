/**
 * The table's shape (agent/nft/names.ts): which hints are in use and the lowest LongLived
 * threshold, what decides the base chains and their rules; a different shape is a full sync.
 */
import t from 'tap';
import { familyOfName, sameShape, shapeOf } from '../../../agent/nft/names.ts';
import { buildDesired, chainName } from '../../../agent/state/desired.ts';
import { shortChainName } from '../../../agent/state/short-lived.ts';
import { KERNEL_TIMEOUTS, timeoutObjectName } from '../../../agent/state/timeout-policy.ts';
import { entry } from '../../helpers/agent.ts';

const state = (...specs: Parameters<typeof entry>[0][]) =>
  buildDesired(
    specs.map((s) => entry(s)),
    [],
  );

const none = { long: false, short: false };

t.test('shape: the hints in use and the lowest LongLived threshold', async (t) => {
  t.same(
    shapeOf(buildDesired([], [])),
    { long: false, short: false, ip: none, ip6: none, floor: 0 },
    'nothing hinted: floor 0',
  );
  t.same(shapeOf(state({ name: 's', hint: 'ShortLived', clusterIPs: ['10.96.0.1'] })), {
    long: false,
    short: true,
    ip: { long: false, short: true },
    ip6: none,
    floor: 0,
  });
  t.same(
    shapeOf(
      state(
        { name: 'a', clusterIPs: ['10.96.0.1'], threshold: '500' },
        { name: 'b', clusterIPs: ['10.96.0.2'], threshold: '64' },
        { name: 's', hint: 'ShortLived', clusterIPs: ['10.96.0.3'] },
      ),
    ),
    { long: true, short: true, ip: { long: true, short: true }, ip6: none, floor: 64 },
    'the lowest of the LongLived ports; ShortLived ones have none',
  );
});

t.test('shape per family: a family has NAT chains only while it has a hint', async (t) => {
  const s = shapeOf(
    state({ name: 'a', clusterIPs: ['fd00::1'] }, { name: 's', hint: 'ShortLived', clusterIPs: ['10.96.0.3'] }),
  );
  t.same(
    [s.ip, s.ip6],
    [
      { long: false, short: true },
      { long: true, short: false },
    ],
  );
});

t.test('sameShape: any difference, the floor and each family included', async (t) => {
  const s = { long: true, short: false, ip: { long: true, short: false }, ip6: none, floor: 20 };
  t.ok(sameShape(s, { ...s }));
  t.notOk(sameShape(s, { ...s, long: false }), 'long');
  t.notOk(sameShape(s, { ...s, short: true }), 'short');
  t.notOk(sameShape(s, { ...s, floor: 5 }), 'floor');
  t.notOk(sameShape(s, { ...s, ip6: { long: true, short: false } }), 'IPv6 LongLived');
  t.notOk(sameShape(s, { ...s, ip6: { long: false, short: true } }), 'IPv6 ShortLived');
  t.notOk(sameShape(s, { ...s, ip: { long: true, short: true } }), 'IPv4 ShortLived');
  t.notOk(sameShape(s, { ...s, ip: none }), 'IPv4 LongLived');
  // The first LongLived Service, with a threshold of 0: the floor stays 0, the shape changes.
  t.notOk(
    sameShape(
      shapeOf(state({ name: 's', hint: 'ShortLived', clusterIPs: ['10.96.0.1'] })),
      shapeOf(
        state(
          { name: 's', hint: 'ShortLived', clusterIPs: ['10.96.0.1'] },
          { name: 'a', clusterIPs: ['10.96.0.2'], threshold: '0' },
        ),
      ),
    ),
  );
});

t.test(
  "familyOfName agrees with the names the state layer makes: each family's hashed objects in its table",
  async (t) => {
    for (const [family, table] of [
      ['ip', 'ip'],
      ['ip6', 'ip6'],
    ] as const) {
      const chain = shortChainName(family, 'tcp', 5);
      t.equal(familyOfName(chain), table, `ShortLived chain ${chain}`);
      t.equal(familyOfName(timeoutObjectName(chain, KERNEL_TIMEOUTS)), table, 'its ct timeout');
      t.equal(familyOfName(chainName(family, [])), 'inet', 'an offload chain stays in inet');
    }
  },
);

import t from 'tap';
import { PMap } from '../../../agent/state/pmap.ts';

t.test('versions are independent and agree with a plain Map', async (t) => {
  const plain = new Map<number, string>();
  let p = PMap.of<number, string>();
  const versions: Array<[PMap<number, string>, Map<number, string>]> = [];
  let seed = 7;
  // A linear congruential generator's low bits cycle quickly: draw from its high bits, so that
  // the keys cover 0-299 and versions flatten their overlays into new bases many times.
  const pick = (n: number) => Math.floor(((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31) * n);
  const touched = new Set<number>();
  for (let round = 0; round < 400; round++) {
    const updates: Array<[number, string | undefined]> = [];
    for (let i = 0; i < 1 + pick(20); i++) {
      const k = pick(300);
      touched.add(k);
      const v = pick(4) === 0 ? undefined : `v${round}.${i}`;
      updates.push([k, v]);
    }
    p = p.with(updates);
    for (const [k, v] of updates) {
      if (v === undefined) plain.delete(k);
      else plain.set(k, v);
    }
    if (round % 50 === 0) versions.push([p, new Map(plain)]);
  }
  t.ok(touched.size > 250, `${touched.size} distinct keys`);
  for (const [pv, snap] of [...versions, [p, plain] as [PMap<number, string>, Map<number, string>]]) {
    t.equal(pv.size, snap.size);
    t.same(new Map([...pv].sort(([a], [b]) => a - b)), new Map([...snap].sort(([a], [b]) => a - b)));
    for (let k = 0; k < 300; k++) {
      if (pv.get(k) !== snap.get(k) || pv.has(k) !== snap.has(k)) {
        t.fail(`key ${k}`);
        return;
      }
    }
  }
  t.same(
    [
      ...PMap.of([[1, 'a']])
        .with([[1, undefined]])
        .keys(),
    ],
    [],
    'removed',
  );
});

import t from 'tap';
import { RATIOS, chartSpec, median, parseSamples, ratioWithCi, renderSvg, report, tables } from '../../bench/dataplane-report.ts';

t.test('parseSamples: path workload mode value; anything else is skipped', async (t) => {
  const s = parseSamples('kpnft tcp none 100\nkpnft tcp none 120\nkpnft tcp hinted 150\n# comment line\nkpnft tcp hinted\nkpnft tcp hinted x\nkpnft tcp hinted 1 2\n');
  t.same([...s], [['kpnft tcp none', [100, 120]], ['kpnft tcp hinted', [150]]]);
});

t.test('median: odd, even, empty', async (t) => {
  t.equal(median([3, 1, 2]), 2);
  t.equal(median([4, 1, 3, 2]), 2.5);
  t.ok(Number.isNaN(median([])));
});

t.test('ratioWithCi: the interval holds the ratio, is tight for separated samples and spans 1 for overlapping ones', async (t) => {
  const fast = [130, 128, 135, 131, 129, 133, 132];
  const slow = [100, 98, 103, 101, 99, 102, 97];
  const r = ratioWithCi(fast, slow);
  t.equal(Math.round(r.ratio * 1000) / 1000, Math.round((131 / 100) * 1000) / 1000);
  t.ok(r.low <= r.ratio && r.ratio <= r.high);
  t.ok(r.low > 1.2, `clearly faster: low end ${r.low} above 1.2`);
  const noisy = ratioWithCi([80, 120, 95, 110, 100, 90, 105], [85, 115, 100, 108, 96, 92, 104]);
  t.ok(noisy.low < 1 && noisy.high > 1, `noise: [${noisy.low}, ${noisy.high}] spans 1`);
  t.same(ratioWithCi(fast, slow), r, 'seeded: the same samples give the same interval');
});

t.test('report: every key of the issue with its _ci_low; unmeasured ones are null', async (t) => {
  const lines = RATIOS.flatMap(([, path, workload, mode, base]) => [`${path} ${workload} ${mode} 2`, `${path} ${workload} ${mode} 2`, `${path} ${workload} ${base} 1`, `${path} ${workload} ${base} 1`]);
  const r = report(parseSamples(lines.join('\n')));
  t.equal(Object.keys(r.json).length, RATIOS.length * 2);
  for (const [key] of RATIOS) {
    t.equal(r.json[key], 2, key);
    t.equal(r.json[`${key}_ci_low`], 2, `${key}_ci_low`);
  }
  const empty = report(new Map());
  t.equal(empty.json.kpnft_tcp_hinted_vs_none, null);
});

t.test('tables: Mbit/s for TCP, medians with their range', async (t) => {
  const out = tables(parseSamples('dnat tcp none 1000000000\ndnat tcp none 2000000000\ndnat tcp hinted 3000000000\n'));
  t.match(out.join('\n'), /dnat:[\s\S]*tcp\s+1500 \[1000-2000\]\s+3000 \[3000-3000\](\s+-){3}\s+Mbit\/s/);
});

t.test('chartSpec and renderSvg: a bar per mode and workload against no flowhint, drawn without a browser', async (t) => {
  const s = parseSamples(['kpnft tcp none 100', 'kpnft tcp none 110', 'kpnft tcp hinted 150', 'kpnft tcp hinted 160', 'kpnft tcp unhinted 100', 'kpnft tcp unhinted 108', 'dnat tcp none 50', 'dnat tcp hinted 60'].join('\n'));
  const spec = chartSpec(s) as { data: { values: Array<{ path: string; mode: string; ratio: number }> } };
  t.same(spec.data.values.map((v) => `${v.path}/${v.mode}=${v.ratio.toFixed(3)}`).sort(), ['dnat/hinted=1.200', 'kpnft/hinted=1.476', 'kpnft/unhinted=0.990']);
  const svg = await renderSvg(chartSpec(s));
  t.match(svg, /^<svg /);
  t.match(svg, /kpnft/);
  t.match(svg, /hinted/);
});

import t from 'tap';
import {
  RATIOS,
  chartSpec,
  cost,
  markdown,
  mean,
  parseFailures,
  parseSamples,
  renderSvg,
  report,
  shareRemoved,
  spread,
  summary,
  tables,
} from '../../bench/dataplane-report.ts';

t.test('parseSamples: path workload mode value; anything else is skipped', async (t) => {
  const s = parseSamples(
    'kpnft tcp none 100\nkpnft tcp none 120\nkpnft tcp hinted 150\n# comment line\nkpnft tcp hinted\nkpnft tcp hinted x\nkpnft tcp hinted 1 2\nkpnft tcp hinted 0\n',
  );
  t.same(
    [...s],
    [
      ['kpnft tcp none', [100, 120]],
      ['kpnft tcp hinted', [150]],
    ],
  );
});

t.test('a failed measurement: counted, and every ratio it enters is null, never a lower sample', async (t) => {
  const text = [
    'kpnft crr none 3000',
    'kpnft crr none 3010',
    'kpnft crr hinted 2900',
    'kpnft crr hinted failed',
    'kpnft crr inherent 2990',
    'kpnft crr unhinted 2980',
    'kpnft crr unhinted failed extra',
    'kpnft udp_pps none 40000',
    'kpnft udp_pps hinted 45000',
  ].join('\n');
  const failed = parseFailures(text);
  t.same([...failed], [['kpnft crr hinted', 1]], 'only a whole `path workload mode failed` line');
  const r = report(parseSamples(text), failed);
  t.equal(r.json.kpnft_crr_hinted_vs_none, null, 'hinted failed once: no ratio from its other sample');
  t.equal(r.json.kpnft_crr_hinted_vs_inherent, null);
  t.equal(r.json.kpnft_crr_unhinted_vs_inherent, 0.9967, '2,980 / 2,990: nothing failed there');
  t.equal(r.json.kpnft_udp_pps_hinted_vs_none, 1.125);
  t.equal(r.json.failed_samples, 1);
  t.match(
    r.lines.find((l) => l.startsWith('kpnft_crr_hinted_vs_none')),
    /failed measurements: kpnft crr hinted/,
  );
  t.equal(r.json.crr_max_repeat_spread, Math.round((10 / 3005) * 10000) / 10000, 'the CRR repeats only');
  t.equal(report(parseSamples(text)).json.failed_samples, 0, 'none given: none counted');
});

t.test('mean and spread: the spread is (max - min) / mean, 0 for one sample', async (t) => {
  t.equal(mean([40000, 40400]), 40200);
  t.equal(spread([40000, 40400]), 400 / 40200);
  t.equal(spread([5]), 0);
  t.ok(Number.isNaN(mean([])));
});

t.test('cost: one guest second is 1e9 instructions', async (t) => {
  t.equal(cost('udp_pps', 40000), 25000, '40,000 packets a second: 25,000 instructions a packet');
  t.equal(cost('tcp', 8000), 1000, '8,000 Mbit/s is 1e6 kB a second: 1,000 instructions a kB');
  t.equal(cost('crr', 500), 2e6);
  t.ok(Number.isNaN(cost('unknown', 1)));
});

t.test('report: every key of the issue; ratios of means; share removed by hand; the largest spread', async (t) => {
  const lines: string[] = [];
  for (const [, path, workload, mode, basePath, base] of RATIOS)
    lines.push(`${path} ${workload} ${mode} 2`, `${path} ${workload} ${mode} 2`, `${basePath} ${workload} ${base} 1`);
  const r = report(parseSamples(lines.join('\n')));
  for (const [key] of RATIOS) t.ok(key in r.json, key);
  const needed = [
    'kpnft_tcp_hinted_vs_none',
    'kpnft_udp_pps_hinted_vs_none',
    'kpnft_rr_hinted_vs_none',
    'kpnft_crr_hinted_vs_none',
    'kpnft_tcp_unhinted_vs_none',
    'kpnft_udp_pps_unhinted_vs_none',
    'kpnft_tcp_hinted_vs_handwritten',
    'kpnft_udp_pps_hinted_vs_handwritten',
    'kpipt_udp_pps_hinted_vs_none',
    'kpnft_udp_netfilter_share_removed_hinted',
    'kpnft_udp_netfilter_share_removed_handwritten',
    'kpnft_udp_pps_unhinted_10k_vs_10',
    'max_repeat_spread',
  ];
  for (const k of needed) t.ok(k in r.json, `the issue's ${k}`);

  // none 40,000 pps (25,000 instructions a packet), floor 50,000 (20,000), hinted 45,000 (22,222.2):
  // the node's netfilter cost is 5,000 a packet, hinted removes 2,777.8 of it: 0.5556.
  const s = parseSamples(
    [
      'kpnft udp_pps none 40000',
      'kpnft udp_pps none 40000',
      'floor udp_pps none 50000',
      'kpnft udp_pps hinted 45000',
      'kpnft udp_pps hinted 45400',
      'kpnft udp_pps handwritten 45200',
    ].join('\n'),
  );
  t.equal(
    Math.round(
      shareRemoved(
        parseSamples('kpnft udp_pps none 40000\nfloor udp_pps none 50000\nkpnft udp_pps hinted 45000'),
        'kpnft',
        'udp_pps',
        'hinted',
      ) * 10000,
    ) / 10000,
    0.5556,
  );
  const rs = report(s);
  t.equal(rs.json.kpnft_udp_pps_hinted_vs_none, 1.13, '45,200 / 40,000');
  t.equal(rs.json.kpnft_udp_pps_hinted_vs_handwritten, 1);
  t.equal(rs.json.max_repeat_spread, Math.round((400 / 45200) * 10000) / 10000);
  t.equal(rs.json.kpnft_udp_pps_unhinted_vs_none, null, 'unmeasured: null');
  t.equal(report(new Map()).json.max_repeat_spread, 0);
});

t.test('tables: a row per workload, a column per measured mode, throughput and instructions', async (t) => {
  const out = tables(
    parseSamples('kpnft udp_pps none 40000\nkpnft udp_pps none 40000\nkpnft udp_pps hinted 50000\n'),
  ).join('\n');
  t.match(out, /\| kpnft \| none \| hinted \|/);
  t.match(
    out,
    /\| udp_pps \| 40,000 packets\/s<br>\*\*25,000\*\* per packet<br>±0\.00 % \| 50,000 packets\/s<br>\*\*20,000\*\* per packet/,
  );
});

t.test('chartSpec and renderSvg: instructions per packet per mode and path, drawn without a browser', async (t) => {
  const s = parseSamples(
    ['kpnft udp_pps none 40000', 'kpnft udp_pps hinted 50000', 'kpnft tcp none 100', 'dnat crr none 1000'].join('\n'),
  );
  const spec = chartSpec(s) as { data: { values: Array<{ path: string; mode: string; instructions: number }> } };
  t.same(
    spec.data.values.map((v) => `${v.path}/${v.mode}=${v.instructions}`).sort(),
    ['dnat/none=1000000', 'kpnft/hinted=20000', 'kpnft/none=25000'],
    'UDP and CRR only',
  );
  const svg = await renderSvg(chartSpec(s));
  t.match(svg, /^<svg /);
  t.match(svg, /kpnft/);
});

t.test('markdown: the generated page holds the tables, the plot and the JSON line', async (t) => {
  const s = parseSamples('kpnft udp_pps none 40000\nkpnft udp_pps hinted 50000');
  const md = markdown(s, report(s), { extra: 1 }, 'Measured today.');
  t.match(md, /^# Data-plane figures \(generated/);
  t.match(md, /Measured today\./);
  t.match(md, /!\[[^\]]*\]\(dataplane\.svg\)/);
  t.match(md, /"kpnft_udp_pps_hinted_vs_none":1\.25/);
  t.match(md, /"extra":1/);
});

t.test('summary: a row per mode with the floor first, instructions per unit, ratio to none', async (t) => {
  const s = parseSamples(
    [
      'floor udp_pps none 50000',
      'kpnft udp_pps none 40000',
      'kpnft udp_pps hinted 50000',
      'kpnft crr none 1000',
      'dnat udp_pps none 1',
    ].join('\n'),
  );
  t.same(summary(s, 'kpnft'), [
    '| kpnft, instructions per | packet | connection |',
    '| --- | --- | --- |',
    '| floor | 20,000 (×1.250) | - |',
    '| none | 25,000 | 1,000,000 |',
    '| hinted | 20,000 (×1.250) | - |',
  ]);
});

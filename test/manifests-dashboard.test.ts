/**
 * The Grafana dashboard (manifests/components/servicemonitor/flowhint-dashboard.json): valid
 * dashboard JSON, every query valid PromQL (the Prometheus project's own grammar,
 * @prometheus-io/lezer-promql) naming only metrics the two processes export, read from the
 * registries they create, and every flowhint metric on some panel. kustomize ships it as the
 * ConfigMap Grafana's sidecar loads.
 */
import t from 'tap';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { parser } from '@prometheus-io/lezer-promql';
import { loadAll } from 'js-yaml';
import { z } from 'zod';
import { createAgentMetrics } from '../agent/report/metrics.ts';
import { createWebhookMetrics } from '../webhook/metrics.ts';
import { kustomizeBuild } from './helpers/kustomize.ts';

const COMPONENT = new URL('../manifests/components/servicemonitor/', import.meta.url).pathname;
const text = readFileSync(join(COMPONENT, 'flowhint-dashboard.json'), 'utf8');

const Datasource = z.object({ type: z.literal('prometheus'), uid: z.literal('${datasource}') });
const GridPos = z
  .object({
    h: z.number().int().positive(),
    w: z.number().int().min(1).max(24),
    x: z.number().int().min(0).max(23),
    y: z.number().int().min(0),
  })
  .refine((g) => g.x + g.w <= 24, 'a panel must fit in 24 columns');
const Target = z.object({
  refId: z.string().regex(/^[A-Z]$/),
  expr: z.string().min(1),
  legendFormat: z.string(),
  datasource: Datasource,
});
const Row = z.object({
  id: z.number().int(),
  type: z.literal('row'),
  title: z.string().min(1),
  gridPos: GridPos,
  collapsed: z.boolean(),
  panels: z.array(z.unknown()),
});
const Panel = z.object({
  id: z.number().int(),
  type: z.enum(['timeseries', 'stat', 'table']),
  title: z.string().min(1),
  description: z.string().min(10),
  datasource: Datasource,
  gridPos: GridPos,
  targets: z.array(Target).min(1),
  fieldConfig: z.object({ defaults: z.record(z.string(), z.unknown()), overrides: z.array(z.unknown()) }),
  options: z.record(z.string(), z.unknown()),
});
const Dashboard = z.object({
  uid: z.string().regex(/^[a-zA-Z0-9_-]{1,40}$/),
  title: z.string().min(1),
  schemaVersion: z.number().int().min(36),
  version: z.number().int(),
  time: z.object({ from: z.string(), to: z.string() }),
  templating: z.object({
    list: z.array(z.object({ name: z.string(), type: z.enum(['datasource', 'query']) }).loose()),
  }),
  panels: z.array(z.union([Row, Panel])).min(1),
});

const dashboard = Dashboard.parse(JSON.parse(text));
const panels = dashboard.panels.filter((p): p is z.infer<typeof Panel> => p.type !== 'row');

/** Metric names each process exports: histograms as their _bucket, _sum and _count series. */
async function exported(): Promise<Set<string>> {
  const names = new Set<string>();
  for (const registry of [createAgentMetrics().registry, createWebhookMetrics().registry]) {
    for (const m of await registry.getMetricsAsJSON()) {
      names.add(m.name);
      if (String(m.type) === 'histogram') for (const s of ['_bucket', '_sum', '_count']) names.add(`${m.name}${s}`);
    }
  }
  return names;
}

/** The metric names a PromQL expression selects, or the offsets where it does not parse. */
function selectors(expr: string): { names: string[]; errors: number[] } {
  const names: string[] = [];
  const errors: number[] = [];
  parser.parse(expr).iterate({
    enter(n) {
      if (n.type.isError) errors.push(n.from);
      if (n.name === 'VectorSelector') {
        const id = n.node.getChild('Identifier');
        if (id) names.push(expr.slice(id.from, id.to));
      }
    },
  });
  return { names, errors };
}

t.test('valid dashboard JSON: unique panel ids, panels in the grid, no overlaps', async (t) => {
  const ids = dashboard.panels.map((p) => p.id);
  t.equal(new Set(ids).size, ids.length, 'panel ids are unique');
  const owner = new Map<string, string>();
  const overlaps: string[] = [];
  for (const p of dashboard.panels) {
    for (let y = p.gridPos.y; y < p.gridPos.y + p.gridPos.h; y++) {
      for (let x = p.gridPos.x; x < p.gridPos.x + p.gridPos.w; x++) {
        const c = `${x},${y}`;
        if (owner.has(c)) overlaps.push(`${p.title} over ${owner.get(c)} at ${c}`);
        owner.set(c, p.title);
      }
    }
  }
  t.same(overlaps.slice(0, 5), [], 'no two panels share a grid cell');
  t.same(
    dashboard.templating.list.map((v) => v.name),
    ['datasource', 'namespace'],
  );
});

t.test('every query parses as PromQL and names a metric the project exports', async (t) => {
  const names = await exported();
  const used = new Set<string>();
  for (const p of panels) {
    for (const target of p.targets) {
      const s = selectors(target.expr);
      t.same(s.errors, [], `${p.title} ${target.refId}: parses (${target.expr})`);
      t.ok(s.names.length > 0, `${p.title} ${target.refId}: selects a metric`);
      for (const n of s.names) {
        t.ok(names.has(n), `${p.title}: ${n} is exported`);
        used.add(n.replace(/_(bucket|sum|count)$/, ''));
      }
    }
  }
  const ours = [...names].filter((n) => n.startsWith('flowhint_') && !/_(bucket|sum|count)$/.test(n));
  for (const n of ours) t.ok(used.has(n), `${n} is on some panel`);
});

t.test('the checks can fail: a broken query and an unknown metric are caught', async (t) => {
  t.not(selectors('sum by (code (rate(flowhint_webhook_rejections_total[5m]))').errors.length, 0);
  t.notOk((await exported()).has('flowhint_agent_offloaded_connection'), 'a misspelt metric is not exported');
});

t.test("kustomize ships it as the ConfigMap for Grafana's sidecar", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'flowhint-dashboard-'));
  try {
    writeFileSync(
      join(dir, 'kustomization.yaml'),
      `apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\ncomponents:\n- ${relative(dir, COMPONENT)}\n`,
    );
    const objs = (loadAll(kustomizeBuild(dir)) as Array<Record<string, any>>).filter(Boolean);
    const cm = objs.find((o) => o.kind === 'ConfigMap' && o.metadata.name === 'flowhint-grafana-dashboard');
    t.equal(cm?.metadata.namespace, 'flowhint-system');
    t.equal(cm?.metadata.labels?.grafana_dashboard, '1');
    t.same(
      JSON.parse(cm?.data?.['flowhint-dashboard.json'] ?? 'null'),
      JSON.parse(text),
      'the ConfigMap holds the dashboard as committed',
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

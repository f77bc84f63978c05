/**
 * Both exporters by Prometheus' conventions, checked with Prometheus' own linter
 * (`promtool check metrics`) and the naming rules spelled out: counters end in `_total`,
 * nothing else does, durations are `_seconds`, and `flowhint_build_info` is on both.
 *
 * prom-client's default `nodejs_*` metrics are kept (dashboards and runbooks know them), but
 * three of its gauges end in `_total` (`nodejs_active_handles_total`, …), which promtool
 * flags; they are not flowhint's to rename, so they are left out of the lint.
 */
import t from 'tap';
import { spawnSync } from 'node:child_process';
import { createAgentMetrics } from '../agent/report/metrics.ts';
import { createWebhookMetrics } from '../webhook/metrics.ts';
import { promtoolCommand } from './setup/tools.ts';

async function expositions(): Promise<Array<[string, string]>> {
  const a = createAgentMetrics();
  a.offloadDecisions.inc({ service: 'shop/cart' }, 3);
  a.syncDuration.observe({ kind: 'full' }, 0.2);
  a.lastSyncSuccess.set(Date.now() / 1000);
  const w = createWebhookMetrics();
  w.requests.inc({ webhook: 'mutate', operation: 'CREATE', allowed: 'true' });
  w.requestDuration.observe({ webhook: 'mutate' }, 0.004);
  return [
    ['agent', await a.registry.metrics()],
    ['webhook', await w.registry.metrics()],
  ];
}

/** The exposition without the `nodejs_*` families (see above). */
const withoutNodejs = (text: string) =>
  text
    .split('\n')
    .filter((l) => !/^(# (HELP|TYPE) )?nodejs_/.test(l))
    .join('\n');

t.test('promtool check metrics passes on both exporters', async (t) => {
  const promtool = promtoolCommand();
  if (!promtool) {
    t.fail("no promtool: npm test's pretest step fetches it (test/setup/prereqs.ts)");
    return;
  }
  for (const [who, text] of await expositions()) {
    const r = spawnSync(promtool, ['check', 'metrics'], { input: withoutNodejs(text), encoding: 'utf8' });
    t.equal(r.status, 0, `${who}: ${r.stdout}${r.stderr}`);
    t.equal(`${r.stdout}${r.stderr}`.trim(), '', `${who}: no lint findings`);
  }
});

t.test("flowhint's own families: counters end in _total and nothing else does; build info on both", async (t) => {
  for (const [who, text] of await expositions()) {
    const types = [...text.matchAll(/^# TYPE (flowhint_\S+) (\S+)$/gm)].map((m) => [m[1] ?? '', m[2] ?? '']);
    t.ok(types.length > 5, `${who}: ${types.length} flowhint families`);
    for (const [name, type] of types) {
      if (type === 'counter') t.match(name, /_total$/, `${who}: counter ${name}`);
      else t.notMatch(name, /_total$/, `${who}: ${type} ${name}`);
      if (type === 'histogram') t.match(name, /_seconds$/, `${who}: histogram ${name} in seconds`);
    }
    t.match(text, /^flowhint_build_info\{version="[^"]+",nodejs_version="v\d+[^"]*"\} 1$/m, `${who}: build info`);
    // The label `node` means the Kubernetes node on a per-node exporter, never Node.js.
    t.notMatch(text, /^flowhint_build_info\{[^}]*\bnode="/m, `${who}: build info has no label named node`);
  }
});

t.test('series exist before their first event', async (t) => {
  const a = await createAgentMetrics({ defaultMetrics: false }).registry.metrics();
  for (const kind of ['full', 'partial', 'devices']) {
    t.match(a, new RegExp(`^flowhint_agent_sync_failures_total\\{kind="${kind}"\\} 0$`, 'm'));
    t.match(a, new RegExp(`^flowhint_agent_sync_duration_seconds_count\\{kind="${kind}"\\} 0$`, 'm'));
  }
  const w = await createWebhookMetrics({ defaultMetrics: false }).registry.metrics();
  t.match(w, /^flowhint_webhook_requests_total\{webhook="validate",operation="UPDATE",allowed="false"\} 0$/m);
  t.match(w, /^flowhint_webhook_request_duration_seconds_bucket\{le="30",webhook="mutate"\} 0$/m, 'buckets reach 30 s');
});

/**
 * The PrometheusRule (manifests/components/servicemonitor/rules.yaml): `promtool check rules`
 * on its groups, and `promtool test rules` on series written by hand
 * (test/fixtures/alerts/flowhint.test.yaml): each alert quiet while healthy or pending, and
 * firing, with its labels and words, after. The same tests on rules whose expressions can
 * never fire must fail, once per alert.
 */
import t from 'tap';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { dump, load } from 'js-yaml';
import { z } from 'zod';
import { promtoolCommand } from './setup/tools.ts';

const COMPONENT = new URL('../manifests/components/servicemonitor/', import.meta.url).pathname;
const FIXTURE = new URL('fixtures/alerts/flowhint.test.yaml', import.meta.url).pathname;

const Rule = z.object({ alert: z.string(), expr: z.string() }).loose();
const Rules = z.object({
  kind: z.literal('PrometheusRule'),
  spec: z.object({ groups: z.array(z.object({ name: z.string(), rules: z.array(Rule) })) }),
});
const rules = Rules.parse(load(readFileSync(join(COMPONENT, 'rules.yaml'), 'utf8')));
const alerts = rules.spec.groups.flatMap((g) => g.rules.map((r) => r.alert));

const Tests = z.object({
  tests: z.array(
    z.object({ alert_rule_test: z.array(z.object({ alertname: z.string(), exp_alerts: z.array(z.unknown()) })) }),
  ),
});
const fixture = readFileSync(FIXTURE, 'utf8');

const dir = mkdtempSync(join(tmpdir(), 'flowhint-rules-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));

/** `promtool test rules` on these groups with the hand-written tests. */
function testRules(promtool: string, groups: unknown): { status: number | null; out: string } {
  writeFileSync(join(dir, 'rules.yaml'), dump({ groups }));
  writeFileSync(join(dir, 'tests.yaml'), fixture.replace('rule_files: [RULES]', 'rule_files: [rules.yaml]'));
  const r = spawnSync(promtool, ['test', 'rules', 'tests.yaml'], { cwd: dir, encoding: 'utf8' });
  return { status: r.status, out: `${r.stdout}${r.stderr}` };
}

t.test('the component ships the rules', async (t) => {
  t.match(readFileSync(join(COMPONENT, 'kustomization.yaml'), 'utf8'), /^- rules\.yaml$/m);
  t.ok(alerts.length >= 8, `${alerts.length} alerts`);
});

t.test('every alert is tested quiet and firing', async (t) => {
  const cases = Tests.parse(load(fixture)).tests.flatMap((c) => c.alert_rule_test);
  for (const a of alerts) {
    t.ok(
      cases.some((c) => c.alertname === a && c.exp_alerts.length === 0),
      `${a}: a case where it does not fire`,
    );
    t.ok(
      cases.some((c) => c.alertname === a && c.exp_alerts.length > 0),
      `${a}: a case where it fires`,
    );
  }
});

t.test('promtool: the rules are valid, and their tests pass', async (t) => {
  const promtool = promtoolCommand();
  if (!promtool) {
    t.fail("no promtool: npm test's pretest step fetches it (test/setup/prereqs.ts)");
    return;
  }
  writeFileSync(join(dir, 'check.yaml'), dump({ groups: rules.spec.groups }));
  const check = spawnSync(promtool, ['check', 'rules', 'check.yaml'], { cwd: dir, encoding: 'utf8' });
  t.equal(check.status, 0, `${check.stdout}${check.stderr}`);
  t.match(check.stdout, `SUCCESS: ${alerts.length} rules found`);
  const r = testRules(promtool, rules.spec.groups);
  t.equal(r.status, 0, r.out);
  t.match(r.out, /SUCCESS/);
});

t.test('the tests can fail: rules that never fire fail every alert', async (t) => {
  const promtool = promtoolCommand();
  if (!promtool) {
    t.fail('no promtool');
    return;
  }
  const never = rules.spec.groups.map((g) => ({ ...g, rules: g.rules.map((r) => ({ ...r, expr: 'vector(0) > 1' })) }));
  const r = testRules(promtool, never);
  t.not(r.status, 0, 'promtool fails');
  for (const a of alerts) t.match(r.out, `alertname: ${a},`, `${a} failed`);
});

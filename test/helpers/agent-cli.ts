/**
 * For tests of the agent's command line in child processes: a scratch network namespace, a
 * services directory holding one LongLived Service (`demo/a`, 10.96.0.10:80) and a state
 * directory, all removed when the test ends.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createNetns, type Netns } from './netns.ts';

export function agentCliFixture(
  t: { teardown: (fn: () => void) => void },
  name: string,
): { ns: Netns; dir: string; state: string } {
  const ns = createNetns();
  const dir = mkdtempSync(join(tmpdir(), `flowhint-${name}-`));
  const state = mkdtempSync(join(tmpdir(), `flowhint-${name}-state-`));
  t.teardown(() => {
    ns.destroy();
    rmSync(dir, { recursive: true, force: true });
    rmSync(state, { recursive: true, force: true });
  });
  writeFileSync(
    join(dir, 'a.yaml'),
    `apiVersion: v1\nkind: Service\nmetadata: {name: a, namespace: demo, annotations: {flowhint.dev/traffic-hint: LongLived}}\nspec: {clusterIP: 10.96.0.10, clusterIPs: [10.96.0.10], ports: [{port: 80}]}\n`,
  );
  return { ns, dir, state };
}

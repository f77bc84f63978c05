/**
 * Faults while the agent runs its loops: `nft` failing one transaction in three (a wrapper
 * on the agent's path to nft), and kill -9 followed by a restart. The last good ruleset
 * stays, the agent backs off and converges, and the metrics show it.
 */
import t from 'tap';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Agent } from '../../agent/agent.ts';
import { createAgentMetrics } from '../../agent/report/metrics.ts';
import { makeNft } from '../../agent/nft/nft.ts';
import { FileSource } from '../../agent/sources/files.ts';
import { silentLogger } from '../../lib/log.ts';
import { createNetns } from '../helpers/netns.ts';
import { expectOffloads, offloads, viewText } from '../helpers/table-view.ts';
import { eventually } from '../helpers/eventually.ts';

const yaml = (i: number) => `apiVersion: v1
kind: Service
metadata: {name: s${i}, namespace: demo, annotations: {flowhint.dev/traffic-hint: LongLived, flowhint.dev/offload-after-packets: "${i}"}}
spec: {clusterIP: 10.96.1.${i}, clusterIPs: [10.96.1.${i}], ports: [{port: ${1000 + i}}]}
`;

t.test('nft fails 1 call in 3: the agent backs off, recovers, and converges', async (t) => {
  const ns = createNetns();
  const dir = mkdtempSync(join(tmpdir(), 'flowhint-faults-'));
  t.teardown(() => {
    ns.destroy();
    rmSync(dir, { recursive: true, force: true });
  });
  const counter = join(dir, '.calls');
  const wrapper = join(dir, '.nft');
  writeFileSync(counter, '0');
  // Every third transaction (nft -f) fails; reads and checks pass through.
  writeFileSync(
    wrapper,
    `#!/bin/sh\nif [ "$1" = "-f" ]; then n=$(($(cat '${counter}') + 1)); echo $n > '${counter}'; if [ $((n % 3)) -eq 0 ]; then echo "Error: injected failure $n" >&2; exit 1; fi; fi\nexec nft "$@"\n`,
  );
  chmodSync(wrapper, 0o755);
  const metrics = createAgentMetrics({ defaultMetrics: false });
  const source = new FileSource({ dir, logger: silentLogger(), pollMs: 100 });
  const agent = new Agent({
    run: ns.run,
    nft: makeNft(ns.run, wrapper),
    source,
    logger: silentLogger(),
    metrics,
    defaultThreshold: 20,
    devices: {},
    counter: true,
    minSyncIntervalMs: 20,
    backoff: { initialMs: 20, maxMs: 200 },
  });
  await agent.prepare();
  agent.startLoops();
  for (let i = 1; i <= 20; i++) {
    writeFileSync(join(dir, `s${i}.yaml`), yaml(i));
    await sleep(60);
  }
  const nft = makeNft(ns.run);
  // What the 20 manifests ask for, written from them (degraded kernel: no `flow add`).
  const want = viewText(
    expectOffloads(
      Array.from({ length: 20 }, (_, k) => ({
        addrs: [`10.96.1.${k + 1}`],
        ports: [{ port: 1001 + k, threshold: k + 1 }],
      })),
      false,
    ),
  );
  const table = async () => (agent.lastSync?.ok === true ? viewText(offloads(await nft.read())) : '');
  await eventually('a successful sync to the table asked for', async () => (await table()) === want).catch(() => false);
  const have = await table();
  await agent.stop();
  t.equal(have, want, 'the table does what all 20 Services ask for');
  const failures = await metrics.registry.getSingleMetricAsString('flowhint_agent_sync_failures_total');
  const total = [...failures.matchAll(/\} (\d+)/g)].reduce((n, m) => n + Number(m[1]), 0);
  t.ok(total >= 1, `failures counted in metrics (${total})`);
  t.comment(
    `nft transactions attempted: ${await import('node:fs').then((fs) => fs.readFileSync(counter, 'utf8').trim())}, failed (injected): ${total}`,
  );
});

/**
 * Recovery times, with the production backoffs: the whole agent in a scratch netns against
 * the list/watch FAKE, one fault after another, each followed by a change to the Services;
 * the time is from the change until the table is exactly the new desired state. The figures
 * are printed (docs/testing.md's Reliability section quotes them); the deadlines are liveness
 * bounds, not targets.
 */
import t from 'tap';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { apiService, startKubeAgent, type Expected } from '../helpers/kube-agent.ts';
import { eventually } from '../helpers/eventually.ts';

t.test('recovery after each fault: the table converges on the change made during it', async (t) => {
  t.setTimeout(240_000);
  const dir = mkdtempSync(join(tmpdir(), 'flowhint-recovery-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  // An nft that fails the next N transactions (the number is in a file), then passes.
  const failures = join(dir, 'fail-next');
  writeFileSync(failures, '0');
  const wrapper = join(dir, 'nft');
  writeFileSync(
    wrapper,
    `#!/bin/sh\nif [ "$1" = "-f" ]; then n=$(cat '${failures}'); if [ "$n" -gt 0 ]; then echo $((n - 1)) > '${failures}'; echo "Error: injected failure" >&2; exit 1; fi; fi\nexec nft "$@"\n`,
  );
  chmodSync(wrapper, 0o755);

  const k = await startKubeAgent(t, { nftBinary: wrapper });
  const want: Expected = {};
  let n = 0;
  /** Add one more Service through the API; the expected state grows with it. */
  const change = () => {
    n += 1;
    k.api.apply(apiService({ name: `s${n}`, clusterIPs: [`10.96.2.${n}`], ports: [{ port: 1000 + n }] }));
    want[`demo/s${n}`] = { addr: `10.96.2.${n}`, port: 1000 + n };
  };
  change();
  await k.agent.prepare();
  k.agent.startLoops();
  await k.timeToConverge(want, 30_000);
  const watchOpen = () => eventually('a watch open', () => k.api.openWatches > 0, { timeoutMs: 20_000 });

  const figures: Array<[string, number]> = [];
  const measure = async (fault: string, inject: () => void, deadlineMs: number) => {
    await watchOpen();
    inject();
    change();
    const ms = await k.timeToConverge(want, deadlineMs);
    figures.push([fault, ms]);
    t.pass(`${fault}: converged in ${(ms / 1000).toFixed(1)} s`);
  };

  await measure('no fault (the baseline: a change through the watch)', () => {}, 10_000);
  await measure('watch connection reset', () => k.api.dropWatches(), 30_000);
  await measure(
    'watch reset, then three HTTP 500s',
    () => {
      k.api.failNext(3, 500);
      k.api.dropWatches();
    },
    60_000,
  );
  await measure(
    'watch closed, history compacted (410 Gone, relist)',
    () => {
      k.api.endWatches();
      k.api.compact();
    },
    30_000,
  );
  await measure(
    'a watch that goes silent (no data, no close)',
    () => {
      k.api.hangNextWatches(1);
      k.api.endWatches();
    },
    60_000,
  );
  await measure('nft failing the next two transactions', () => writeFileSync(failures, '2'), 60_000);
  t.ok(k.restarts() >= 2, `${k.restarts()} informer restarts in all`);
  t.comment(
    [
      'recovery times (change made during the fault -> table converged):',
      ...figures.map(([f, ms]) => `  ${f}: ${(ms / 1000).toFixed(1)} s`),
    ].join('\n'),
  );
});

/**
 * `npm run test:kernel`: boot the flowtable kernel and run the scenarios inside, then boot it
 * again under icount for the data-plane gate (test/kernel/icount/gate.sh). With a script
 * argument, only that script (`npm run bench:dataplane` is test/kernel/icount/bench.sh).
 * A script under test/kernel/icount/ runs under icount (vm.ts). Exits non-zero if any script
 * failed; ends with the plain "N passed, N failed" over all of them. Where it cannot run (not
 * root, no qemu) it fails loudly: this suite never skips and reports success.
 */
import { HarnessError, runInVm } from './vm.ts';

const scripts = process.argv[2] ? [process.argv[2]] : ['test/kernel/scenarios.sh', 'test/kernel/icount/gate.sh'];
// The benchmark's knobs (BENCH_SECS, …) reach the script inside the VM.
const env = Object.fromEntries(
  Object.entries(process.env).filter((e): e is [string, string] => e[0].startsWith('BENCH_') && e[1] !== undefined),
);

/** One VM run; its exit status, its counts, and its last JSON line. */
async function runOne(
  script: string,
): Promise<{ code: number; passed: number; failed: number; json?: string | undefined }> {
  const started = Date.now();
  try {
    const r = await runInVm(script, {
      env,
      onOutput: (s) => process.stdout.write(s),
      timeoutMs: 60 * 60_000,
      icount: script.includes('/icount/'),
    });
    const secs = Math.round((Date.now() - started) / 1000);
    const counts = [...r.output.matchAll(/^(\d+) passed, (\d+) failed\r?$/gm)].at(-1);
    const json = r.output
      .split(/\r?\n/)
      .filter((l) => /^\{".*\}\s*$/.test(l))
      .at(-1)
      ?.trim();
    const passed = Number(counts?.[1] ?? 0);
    const failed = Number(counts?.[2] ?? 0);
    if (r.timedOut) {
      console.error(`\ntest:kernel: FAILED: ${script}: the VM timed out after ${secs}s`);
      return { code: 1, passed, failed: failed + 1, json };
    }
    if (!/FLOWHINT_EXIT=\d+/.test(r.output)) {
      console.error(
        `\ntest:kernel: FAILED: ${script}: the VM stopped without reporting an exit status (boot failure?) after ${secs}s`,
      );
      return { code: 1, passed, failed: failed + 1, json };
    }
    console.log(`\ntest:kernel: ${script} exited ${r.code} in ${secs}s`);
    return { code: r.code, passed, failed: r.code !== 0 && failed === 0 ? 1 : failed, json };
  } catch (err) {
    console.error(`test:kernel: FAILED: ${script}: ${err instanceof HarnessError ? err.message : String(err)}`);
    return { code: 1, passed: 0, failed: 1 };
  }
}

let passed = 0;
let failed = 0;
let code = 0;
let json: string | undefined;
for (const script of scripts) {
  const r = await runOne(script);
  passed += r.passed;
  failed += r.failed;
  if (r.code !== 0) code = r.code;
  json = r.json ?? json;
}
// A benchmark's result is its last JSON line; repeat it, then the counts over every script.
if (json) console.log(json);
if (scripts.length > 1 || passed + failed > 0) console.log(`${passed} passed, ${failed} failed`);
process.exitCode = code;

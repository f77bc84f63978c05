/**
 * `npm run test:kernel`: boot the flowtable kernel and run the scenarios inside.
 * Exits with the scenarios' status. Where it cannot run (not root, no qemu) it fails loudly:
 * this suite never skips and reports success.
 */
import { HarnessError, runInVm } from './vm.ts';

const script = process.argv[2] ?? 'test/kernel/scenarios.sh';
// The benchmark's knobs (BENCH_ROUNDS, BENCH_SECS, …) reach the script inside the VM.
const env = Object.fromEntries(Object.entries(process.env).filter((e): e is [string, string] => e[0].startsWith('BENCH_') && e[1] !== undefined));
const started = Date.now();
try {
  const r = await runInVm(script, { env, onOutput: (s) => process.stdout.write(s), timeoutMs: 30 * 60_000 });
  const secs = Math.round((Date.now() - started) / 1000);
  if (r.timedOut) {
    console.error(`\ntest:kernel: FAILED: the VM timed out after ${secs}s`);
    process.exitCode = 1;
  } else if (!/FLOWHINT_EXIT=\d+/.test(r.output)) {
    console.error(`\ntest:kernel: FAILED: the VM stopped without reporting an exit status (boot failure?) after ${secs}s`);
    process.exitCode = 1;
  } else {
    console.log(`\ntest:kernel: ${script} exited ${r.code} in ${secs}s`);
    // A benchmark's result is its last JSON line; repeat it as this command's last line.
    const json = r.output.split(/\r?\n/).filter((l) => /^\{".*\}\s*$/.test(l)).at(-1);
    if (json) console.log(json.trim());
    process.exitCode = r.code;
  }
} catch (err) {
  console.error(`test:kernel: FAILED: ${err instanceof HarnessError ? err.message : String(err)}`);
  process.exitCode = 1;
}

/**
 * `npm run test:kernel`: boot the flowtable kernel and run the scenarios inside, then boot it
 * again under icount for the data-plane gate (test/kernel/icount/gate.sh). With a script
 * argument, only that script (`npm run bench:dataplane` is test/kernel/icount/bench.sh).
 * A script under test/kernel/icount/ runs under icount (vm.ts). The scenarios run on each
 * kernel of `KERNELS` in turn (kernels.ts; default 6.1, 6.12 and sid's newest), with one
 * "kernel K: N passed, N failed" line each; the icount gate only on 6.1, the kernel its
 * baseline was measured on. A script named on the command line runs on 6.1, or on every
 * kernel `KERNELS` lists. Two VMs run at a time (`KERNEL_JOBS`, default 2); each one's
 * console is then printed whole when it ends. Exits non-zero if any script failed; ends with
 * the plain "N passed, N failed" over all of them. Where it cannot run (not root, no qemu)
 * it fails loudly: this suite never skips and reports success.
 */
import { ensureKernel, HarnessError, parseKernels, type KernelId } from './kernels.ts';
import { diedAtStart, failureDigest, withWallTime } from './run-report.ts';
import { CACHE, ensureInitrd, runInVm } from './vm.ts';

const scripts = process.argv[2] ? [process.argv[2]] : ['test/kernel/scenarios.sh', 'test/kernel/icount/gate.sh'];
// The benchmark's knobs (BENCH_SECS, …) reach the script inside the VM.
const env = Object.fromEntries(
  Object.entries(process.env).filter((e): e is [string, string] => e[0].startsWith('BENCH_') && e[1] !== undefined),
);

/** One VM run; its exit status, its counts, and its last JSON line. */
async function runOne(
  script: string,
  kernel: KernelId,
  say: Say,
): Promise<{ code: number; passed: number; failed: number; json?: string | undefined; secs: number; tail?: string }> {
  const started = Date.now();
  const secs = () => Math.round((Date.now() - started) / 1000);
  try {
    const r = await runInVm(script, {
      env,
      onOutput: say.out,
      // The full benchmark takes over an hour (docs/testing.md); every other script far less.
      timeoutMs: (script.endsWith('/bench.sh') ? 150 : 60) * 60_000,
      icount: script.includes('/icount/'),
      kernel,
    });
    const counts = [...r.output.matchAll(/^(\d+) passed, (\d+) failed\r?$/gm)].at(-1);
    const json = r.output
      .split(/\r?\n/)
      .filter((l) => /^\{".*\}\s*$/.test(l))
      .at(-1)
      ?.trim();
    const passed = Number(counts?.[1] ?? 0);
    const failed = Number(counts?.[2] ?? 0);
    const where = `kernel ${kernel}: ${script}`;
    const tail = failureDigest(r.output);
    if (r.timedOut) {
      say.err(`\ntest:kernel: FAILED: ${where}: the VM timed out after ${secs()}s\n`);
      return { code: 1, passed, failed: failed + 1, json, secs: secs(), tail };
    }
    if (!/FLOWHINT_EXIT=\d+/.test(r.output)) {
      say.err(
        `\ntest:kernel: FAILED: ${where}: the VM stopped without reporting an exit status (boot failure?) after ${secs()}s\n`,
      );
      return { code: 1, passed, failed: failed + 1, json, secs: secs(), tail };
    }
    say.out(`\ntest:kernel: ${where} exited ${r.code} in ${secs()}s\n`);
    const f = r.code !== 0 && failed === 0 ? 1 : failed;
    return { code: r.code, passed, failed: f, json, secs: secs(), ...(f > 0 ? { tail } : {}) };
  } catch (err) {
    const why = `test:kernel: FAILED: kernel ${kernel}: ${script}: ${err instanceof HarnessError ? err.message : String(err)}\n`;
    say.err(why);
    return { code: 1, passed: 0, failed: 1, secs: secs(), tail: why };
  }
}

/** Where a run's console goes: straight through when it runs alone, held and printed whole when not. */
interface Say {
  out: (s: string) => void;
  err: (s: string) => void;
}

let kernels: KernelId[];
try {
  // One script named (the benchmark, a dev script): 6.1 unless KERNELS says otherwise.
  kernels = parseKernels(process.env.KERNELS ?? (process.argv[2] ? '6.1' : undefined));
  // Fetched one at a time before any VM starts (two runs may share a kernel).
  for (const k of kernels) ensureInitrd(ensureKernel(CACHE, k));
} catch (err) {
  console.error(`test:kernel: ${err instanceof HarnessError ? err.message : String(err)}`);
  process.exit(2);
}
// Each (kernel, script): the gate's ratios were measured on 6.1, the other kernels run the scenarios.
const jobs = kernels.flatMap((kernel) =>
  (process.argv[2] || kernel === '6.1' ? scripts : scripts.filter((s) => !s.includes('/icount/'))).map((script) => ({
    kernel,
    script,
  })),
);
// Two VMs at a time (KERNEL_JOBS): the machine's two cores; a scenario suite is mostly waiting.
const width = Math.max(1, Math.min(Number(process.env.KERNEL_JOBS ?? 2) || 1, jobs.length));
const results: Array<Awaited<ReturnType<typeof runOne>> & { kernel: KernelId; script: string }> = [];
const retried: typeof results = [];
let next = 0;
const worker = async () => {
  while (next < jobs.length) {
    const job = jobs[next++]!;
    const held: string[] = [];
    const say: Say =
      width === 1
        ? { out: (t) => process.stdout.write(t), err: (t) => process.stderr.write(t) }
        : { out: (t) => held.push(t), err: (t) => held.push(t) };
    if (width > 1) console.log(`test:kernel: kernel ${job.kernel}: ${job.script} started`);
    let r = await runOne(job.script, job.kernel, say);
    if (diedAtStart(r)) {
      // Once, and said: its digest is printed at the end with the rest (run-report.ts).
      retried.push({ ...r, ...job });
      say.out(
        `\ntest:kernel: kernel ${job.kernel}: ${job.script} ended after ${r.secs}s before any check passed; running it once more\n`,
      );
      r = await runOne(job.script, job.kernel, say);
    }
    if (held.length > 0) process.stdout.write(`\n===== kernel ${job.kernel}: ${job.script} =====\n${held.join('')}\n`);
    results.push({ ...r, ...job });
  }
};
await Promise.all(Array.from({ length: width }, worker));

let passed = 0;
let failed = 0;
let code = 0;
const perKernel: string[] = [];
let json: string | undefined;
for (const kernel of kernels) {
  const mine = results.filter((r) => r.kernel === kernel);
  const kp = mine.reduce((n, r) => n + r.passed, 0);
  const kf = mine.reduce((n, r) => n + r.failed, 0);
  passed += kp;
  failed += kf;
  for (const r of mine) {
    if (r.code !== 0) code = r.code;
    json = (r.json && jobs.length === 1 ? withWallTime(r.json, r.secs) : r.json) ?? json;
  }
  const times = mine.map((r) => `${r.script.replace(/^.*\//, '')} ${r.secs}s`).join(', ');
  perKernel.push(`kernel ${kernel}: ${kp} passed, ${kf} failed (${times})`);
}
// A failed run again, after every console (run-report.ts): CI keeps only the tail.
for (const r of retried)
  console.log(
    `\n===== RETRIED: kernel ${r.kernel}: ${r.script} died at its start (${r.secs}s); that first run's last lines =====\n${r.tail ?? ''}\n=====`,
  );
for (const r of results)
  if (r.tail !== undefined && (r.code !== 0 || r.failed > 0))
    console.log(
      `\n===== FAILED: kernel ${r.kernel}: ${r.script}: its failed checks and last lines =====\n${r.tail}\n=====`,
    );
// A benchmark's result is its last JSON line; repeat it, then the counts per kernel and over every script.
if (json) console.log(json);
for (const line of perKernel) console.log(line);
if (scripts.length > 1 || passed + failed > 0) console.log(`${passed} passed, ${failed} failed`);
process.exitCode = code;

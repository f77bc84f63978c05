/**
 * Servers as child processes, the way they run in a Pod: output to a file (as a container
 * runtime takes it), readiness from a log line, RSS from /proc. Used by tests that measure
 * the real process (RSS over a fuzzing run) and by the benchmarks.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadAll } from 'js-yaml';

/** Resident set size of a process, from /proc, in MiB. */
export function rssMiB(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1] ?? NaN);
  return kb / 1024;
}

/**
 * Start a child with its output going to a file, as a container runtime would take it, and
 * resolve once a line of it satisfies `ready`. (A pipe read by this busy process would
 * block the child's synchronous log writes and show up as its latency.)
 */
export async function startChild(
  cmd: string,
  args: string[],
  ready: (line: string) => string | undefined,
  logFile: string,
  env: NodeJS.ProcessEnv = process.env,
): Promise<{ child: ChildProcess; value: string }> {
  const fd = openSync(logFile, 'w');
  const child = spawn(cmd, args, { stdio: ['ignore', fd, fd], env });
  closeSync(fd);
  const deadline = Date.now() + 20_000;
  for (;;) {
    if (child.exitCode !== null)
      throw new Error(`${cmd} exited ${child.exitCode} before ready: ${readFileSync(logFile, 'utf8').slice(-500)}`);
    for (const line of readFileSync(logFile, 'utf8').split('\n')) {
      const v = ready(line);
      if (v !== undefined) return { child, value: v };
    }
    if (Date.now() > deadline) throw new Error(`${cmd} ${args.join(' ')} did not become ready`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

export async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return;
  const done = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  await done;
}

/** A container's environment variable in manifests/base (e.g. the deployed NODE_OPTIONS). */
export function deployedEnv(file: string, container: string, name: string): string | undefined {
  const docs = loadAll(readFileSync(new URL(`../../manifests/base/${file}`, import.meta.url), 'utf8')) as Array<{
    spec?: {
      template?: { spec?: { containers?: Array<{ name: string; env?: Array<{ name: string; value?: string }> }> } };
    };
  }>;
  const c = docs.flatMap((d) => d.spec?.template?.spec?.containers ?? []).find((x) => x.name === container);
  return c?.env?.find((e) => e.name === name)?.value;
}

/** The TypeScript entry point, run with Node's type stripping (development, tests). */
export const SOURCE_ENTRY = new URL('../../bin/flowhint.ts', import.meta.url).pathname;

/**
 * `flowhint webhook` on 127.0.0.1 with ephemeral ports, with the NODE_OPTIONS of the
 * deployed container (heap sizing changes RSS a lot); resolves with its URLs. `entry` is
 * the TypeScript source by default, or the compiled `dist/bin/flowhint.js` the image ships.
 */
export async function startWebhookChild(
  certFile: string,
  keyFile: string,
  logDir: string,
  entry = SOURCE_ENTRY,
): Promise<{ child: ChildProcess; url: string; metricsUrl: string }> {
  const { child, value } = await startChild(
    process.execPath,
    [
      entry,
      'webhook',
      '--cert',
      certFile,
      '--key',
      keyFile,
      '--host',
      '127.0.0.1',
      '--port',
      '0',
      '--metrics-port',
      '0',
    ],
    (l) => {
      try {
        const j = JSON.parse(l) as { msg?: string; url?: string; metrics?: string };
        return j.msg === 'webhook listening' ? `${j.url} ${j.metrics}` : undefined;
      } catch {
        return undefined;
      }
    },
    join(logDir, `webhook-${entry.endsWith('.js') ? 'js' : 'ts'}.log`),
    { ...process.env, NODE_OPTIONS: deployedEnv('webhook.yaml', 'webhook', 'NODE_OPTIONS') ?? '' },
  );
  const [url, metricsUrl] = value.split(' ') as [string, string];
  return { child, url, metricsUrl };
}

/** Shared benchmark plumbing: child servers, their RSS, medians, the final JSON line. */
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync, readFileSync } from 'node:fs';

export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? (s[m] as number) : ((s[m - 1] as number) + (s[m] as number)) / 2;
}

export function round(x: number, digits = 3): number {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}

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
export async function startChild(cmd: string, args: string[], ready: (line: string) => string | undefined, logFile: string): Promise<{ child: ChildProcess; value: string }> {
  const fd = openSync(logFile, 'w');
  const child = spawn(cmd, args, { stdio: ['ignore', fd, fd] });
  closeSync(fd);
  const deadline = Date.now() + 20_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`${cmd} exited ${child.exitCode} before ready: ${readFileSync(logFile, 'utf8').slice(-500)}`);
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

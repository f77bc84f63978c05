/** Shared benchmark plumbing: child servers, their RSS, medians, the final JSON line. */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';

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

/** Start a child and resolve once a line on its output satisfies `ready`. */
export async function startChild(cmd: string, args: string[], ready: (line: string) => string | undefined, stream: 'stdout' | 'stderr' = 'stdout'): Promise<{ child: ChildProcess; value: string }> {
  const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  const rl = createInterface({ input: child[stream]! });
  const other = stream === 'stdout' ? child.stderr! : child.stdout!;
  other.resume();
  const value = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${cmd} ${args.join(' ')} did not become ready`)), 20_000);
    child.once('exit', (code) => reject(new Error(`${cmd} exited ${code} before ready`)));
    rl.on('line', (line) => {
      const v = ready(line);
      if (v !== undefined) {
        clearTimeout(timer);
        resolve(v);
      }
    });
  });
  rl.on('line', () => {});
  return { child, value };
}

export async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return;
  const done = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  await done;
}

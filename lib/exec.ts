/**
 * Running host tools (nft, ip, conntrack, sysctl): argv arrays, never a shell string, with
 * stdin, a timeout and captured output. A `prefix` (e.g. `ip netns exec NS`) lets tests and
 * the demo run the same code inside a scratch network namespace.
 */
import { spawn } from 'node:child_process';

export interface ExecResult {
  code: number;
  stdout: string;
  stderr: string;
}

export interface Runner {
  (argv: readonly string[], options?: { stdin?: string; timeoutMs?: number }): Promise<ExecResult>;
  /**
   * The same, with stdout handed over line by line as it comes and never kept (`stdout` is
   * empty): for output that grows with the node (`conntrack -L`). Runners without it (test
   * fakes) are read whole.
   */
  lines?: (
    argv: readonly string[],
    onLine: (line: string) => void,
    options?: { timeoutMs?: number },
  ) => Promise<ExecResult>;
}

export function makeRunner(prefix: readonly string[] = []): Runner {
  const run: Runner = (argv, options = {}) =>
    new Promise((resolve) => {
      const full = [...prefix, ...argv];
      const [cmd, ...args] = full as [string, ...string[]];
      const child = spawn(cmd, args, { stdio: ['pipe', 'pipe', 'pipe'] });
      const out: Buffer[] = [];
      const err: Buffer[] = [];
      let settled = false;
      const finish = (r: ExecResult) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        resolve(r);
      };
      const timer = setTimeout(() => {
        child.kill('SIGKILL');
        finish({
          code: 124,
          stdout: Buffer.concat(out).toString(),
          stderr: `${Buffer.concat(err).toString()}\n${cmd}: timed out after ${options.timeoutMs ?? 30_000} ms`,
        });
      }, options.timeoutMs ?? 30_000);
      child.stdout.on('data', (c: Buffer) => out.push(c));
      child.stderr.on('data', (c: Buffer) => err.push(c));
      child.on('error', (e) => finish({ code: 127, stdout: '', stderr: `${cmd}: ${e.message}` }));
      child.on('close', (code) =>
        finish({ code: code ?? 1, stdout: Buffer.concat(out).toString(), stderr: Buffer.concat(err).toString() }),
      );
      child.stdin.on('error', () => {});
      child.stdin.end(options.stdin ?? '');
    });
  run.lines = (argv, onLine, options = {}) => streamLines([...prefix, ...argv], onLine, options.timeoutMs ?? 30_000);
  return run;
}

/** Run argv, calling onLine for each line of its stdout; only a partial line is ever held. */
function streamLines(full: readonly string[], onLine: (line: string) => void, timeoutMs: number): Promise<ExecResult> {
  return new Promise((resolve) => {
    const [cmd, ...args] = full as [string, ...string[]];
    const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    const err: Buffer[] = [];
    let partial = '';
    let settled = false;
    const finish = (code: number, extra = '') => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      if (partial) onLine(partial);
      resolve({ code, stdout: '', stderr: Buffer.concat(err).toString() + extra });
    };
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      finish(124, `\n${cmd}: timed out after ${timeoutMs} ms`);
    }, timeoutMs);
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (chunk: string) => {
      if (settled) return;
      const parts = (partial + chunk).split('\n');
      partial = parts.pop() ?? '';
      for (const line of parts) onLine(line);
    });
    child.stderr.on('data', (c: Buffer) => err.push(c));
    child.on('error', (e) => finish(127, `${cmd}: ${e.message}`));
    child.on('close', (code) => finish(code ?? 1));
  });
}

/** A Runner for host tools, run inside the named network namespace (`ip netns exec`) when one is given. */
export function netnsRunner(netns: string | undefined): Runner {
  return makeRunner(netns ? ['ip', 'netns', 'exec', netns] : []);
}

/**
 * CLI flag parsing: node:util parseArgs for the syntax, zod for the values, so every flag
 * is checked at the edge and a bad one exits 2 with a message naming it.
 */
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { z } from 'zod';
import { FlowhintError } from './errors.ts';

export class UsageError extends FlowhintError {
  constructor(message: string) {
    super('FH_USAGE', message);
  }
}

/** Thrown after printing a command's usage for --help; the CLI exits 0. */
export class HelpShown extends FlowhintError {
  constructor() {
    super('FH_HELP', 'help shown');
  }
}

export function parseFlags<S extends z.ZodType>(
  argv: string[],
  options: NonNullable<ParseArgsConfig['options']>,
  schema: S,
  usage: string,
): z.infer<S> {
  if (argv.includes('--help') || argv.includes('-h')) {
    process.stdout.write(`${usage}\n`);
    throw new HelpShown();
  }
  let values: Record<string, unknown>;
  try {
    ({ values } = parseArgs({ args: argv, options, strict: true, allowPositionals: false }));
  } catch (err) {
    const flag = /Unknown option '(--[^']+)'/.exec((err as Error).message)?.[1];
    const guess = flag
      ? closest(
          flag,
          Object.keys(options).map((o) => `--${o}`),
        )
      : undefined;
    throw new UsageError(`${(err as Error).message}${guess ? `; did you mean ${guess}?` : ''}\n${usage}`);
  }
  const parsed = schema.safeParse(values);
  if (!parsed.success) {
    const msg = parsed.error.issues.map((i) => `--${i.path.join('.')}: ${i.message}`).join('; ');
    throw new UsageError(`${msg}\n${usage}`);
  }
  return parsed.data;
}

/** A decimal port 0-65535 given as a flag string. */
export function portFlag(fallback: number) {
  return z.coerce.number().int().min(0).max(65535).default(fallback);
}

/** The closest known name within two edits, for "did you mean". */
export function closest(word: string, names: readonly string[]): string | undefined {
  const distance = (a: string, b: string) => {
    let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
    for (let i = 1; i <= a.length; i++) {
      const row = [i];
      for (let j = 1; j <= b.length; j++)
        row[j] = Math.min(
          (prev[j] ?? 0) + 1,
          (row[j - 1] ?? 0) + 1,
          (prev[j - 1] ?? 0) + (a[i - 1] === b[j - 1] ? 0 : 1),
        );
      prev = row;
    }
    return prev[b.length] ?? Infinity;
  };
  const best = names.map((n) => ({ n, d: distance(word, n) })).sort((x, y) => x.d - y.d)[0];
  return best && best.d <= 2 ? best.n : undefined;
}

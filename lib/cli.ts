/**
 * CLI flag parsing: node:util parseArgs for the syntax, zod for the values, so every flag
 * is checked at the edge and a bad one exits 2 with a message naming it. Each flag is
 * declared once, with what it does and its default, and `--help` prints them in a "Flags:"
 * section as kubectl (cobra) does.
 */
import { parseArgs } from 'node:util';
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

/** One flag: its syntax, the name of its value in help, what it does, and its default as written on the command line. */
export interface Flag {
  readonly type: 'string' | 'boolean';
  readonly multiple?: boolean;
  /** A one-letter alias (`-n`), as kubectl's. */
  readonly short?: string;
  readonly value?: string;
  readonly help: string;
  readonly default?: string;
}
export type Flags = Readonly<Record<string, Flag>>;

/** The "Flags:" section: every flag, its value, what it does and its default, then --help. */
export function flagsSection(flags: Flags, command: string): string {
  const rows = Object.entries(flags)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([name, f]) => {
      const left = `  ${f.short ? `-${f.short}, ` : '    '}--${name}${f.type === 'string' ? ` ${f.value ?? 'string'}` : ''}`;
      const repeat = f.multiple ? ' (repeatable)' : '';
      const def =
        f.default === undefined
          ? ''
          : ` (default ${/^[0-9]+$/.test(f.default) ? f.default : JSON.stringify(f.default)})`;
      return [left, `${f.help}${repeat}${def}`] as const;
    });
  rows.push(['  -h, --help', `help for ${command}`]);
  const width = Math.max(...rows.map(([l]) => l.length)) + 3;
  return `Flags:\n${rows.map(([l, r]) => `${l.padEnd(width)}${r}`).join('\n')}`;
}

export function parseFlags<S extends z.ZodType>(
  argv: string[],
  flags: Flags,
  schema: S,
  usage: string,
  /** Arguments that are not flags reach the schema as `_` (otherwise they are refused). */
  opts: { positionals?: boolean } = {},
): z.infer<S> {
  const command = /^usage: flowhint (\S+)/.exec(usage)?.[1] ?? 'flowhint';
  if (argv.includes('--help') || argv.includes('-h')) {
    process.stdout.write(`${usage}\n\n${flagsSection(flags, command)}\n`);
    throw new HelpShown();
  }
  const options = Object.fromEntries(
    Object.entries(flags).map(([name, f]) => [
      name,
      { type: f.type, ...(f.multiple ? { multiple: true } : {}), ...(f.short ? { short: f.short } : {}) },
    ]),
  );
  const more = `\nRun 'flowhint ${command} --help' for its flags.`;
  let values: Record<string, unknown>;
  try {
    const r = parseArgs({ args: argv, options, strict: true, allowPositionals: opts.positionals === true });
    values = opts.positionals === true ? { ...r.values, _: r.positionals } : r.values;
  } catch (err) {
    const flag = /Unknown option '(-[^']+)'/.exec((err as Error).message)?.[1];
    if (flag === undefined) throw new UsageError(`${(err as Error).message}${more}`);
    // Node's own words add advice about positionals after '--', with an unclosed quote.
    const guess = closest(
      flag,
      Object.keys(options).map((o) => `--${o}`),
    );
    throw new UsageError(`unknown flag ${flag}${guess ? `; did you mean ${guess}?` : ''}${more}`);
  }
  const parsed = schema.safeParse(values);
  if (!parsed.success) {
    const words = (i: z.core.$ZodIssue) => {
      const flag = `--${i.path.join('.')}`;
      if (i.path.length === 0) return i.message;
      return i.code === 'invalid_type' && /received undefined/.test(i.message)
        ? `${flag} is required`
        : `${flag}: ${i.message}`;
    };
    const msg = parsed.error.issues.map(words).join('; ');
    throw new UsageError(`${msg}${more}`);
  }
  return parsed.data;
}

/** A whole number from `min` to `max` given as a flag string, refused in words. */
export function intFlag(min: number, max: number, fallback: number) {
  return z
    .string()
    .default(String(fallback))
    .transform((v, ctx) => {
      const n = /^[0-9]+$/.test(v.trim()) ? Number(v.trim()) : NaN;
      if (!(n >= min && n <= max)) {
        ctx.addIssue({ code: 'custom', message: `${JSON.stringify(v)} is not a whole number from ${min} to ${max}` });
        return z.NEVER;
      }
      return n;
    });
}

/** `--netns NAME`: an `ip netns` name, the only form in which it reaches a command line. */
export const netnsName = z
  .string()
  .regex(/^[A-Za-z0-9_.-]+$/, 'not a network namespace name (letters, digits, _ . -)')
  .optional();

/** A decimal port 0-65535 given as a flag string. */
export function portFlag(fallback: number) {
  return intFlag(0, 65535, fallback);
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

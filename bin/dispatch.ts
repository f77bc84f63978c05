/**
 * The command line's shell, shared by `flowhint` (bin/flowhint.ts) and the kubectl plugin
 * (bin/kubectl-flowhint.ts): usage, `version`, a catalogue error for an unknown command,
 * each subcommand loaded on demand, and the process ending within seconds of its result.
 */
import { closest } from '../lib/cli.ts';
import { FlowhintError } from '../lib/errors.ts';
import { flowhintVersion } from '../lib/version.ts';

export type Command = (argv: string[]) => Promise<number>;
export type Commands = Record<string, { summary: string; load: () => Promise<Command> }>;

/** The client-side commands: `flowhint`'s and the kubectl plugin's (all it has). */
export const CLIENT_COMMANDS: Commands = {
  explain: {
    summary:
      "what happens to a Service's hint: accepted, programmed on which nodes, what is not offloadable, what to do",
    load: async () => (await import('./explain.ts')).explainCommand,
  },
  backfill: {
    summary: 'label already-annotated Services through the webhook defaulting; report invalid hints',
    load: async () => (await import('./backfill.ts')).backfillCommand,
  },
};

function usage(program: string, commands: Commands): string {
  const lines = [
    ...Object.entries(commands).map(([name, c]) => `  ${name.padEnd(10)} ${c.summary}`),
    `  ${'version'.padEnd(10)} print the version`,
  ];
  return `usage: ${program} <command> [flags]\n\ncommands:\n${lines.join('\n')}\n\nRun \`${program} <command> --help\` for a command's flags.\n`;
}

async function main(program: string, commands: Commands, argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    process.stdout.write(usage(program, commands));
    return name === undefined ? 2 : 0;
  }
  if (name === 'version' || name === '--version') {
    process.stdout.write(`flowhint ${flowhintVersion()} (node ${process.version})\n`);
    return 0;
  }
  const command = commands[name];
  if (!command) {
    const guess = closest(name, [...Object.keys(commands), 'version']);
    const hint = guess ? `; did you mean ${JSON.stringify(guess)}?` : '';
    process.stderr.write(
      `flowhint: FH_USAGE: unknown command ${JSON.stringify(name)}${hint}\n${usage(program, commands)}`,
    );
    return 2;
  }
  return (await command.load())(rest);
}

/** Whatever a command left open, the process ends within seconds of its result. */
function exitSoon(): void {
  setTimeout(() => process.exit(), 3_000).unref();
}

/** Run the command `process.argv` names; a known error is one catalogue line, no stack. */
export function runCommandLine(program: string, commands: Commands): void {
  main(program, commands, process.argv.slice(2)).then(
    (code) => {
      process.exitCode = code;
      exitSoon();
    },
    (err: unknown) => {
      if (err instanceof FlowhintError) {
        // A known error: its code and message, no stack; the catalogue's exit status.
        if (err.code !== 'FH_HELP') process.stderr.write(`flowhint: ${err.code}: ${err.message}\n`);
        process.exitCode = err.exitCode;
      } else {
        process.stderr.write(`flowhint: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
        process.exitCode = 1;
      }
      exitSoon();
    },
  );
}

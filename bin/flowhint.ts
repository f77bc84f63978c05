#!/usr/bin/env node
/**
 * flowhint: per-Service flowtable offload for Kubernetes.
 * Subcommands load their module on demand, so `flowhint certs` never loads the agent.
 */
import { closest } from '../lib/cli.ts';
import { FlowhintError } from '../lib/errors.ts';
import { flowhintVersion } from '../lib/version.ts';

type Command = (argv: string[]) => Promise<number>;

const COMMANDS: Record<string, { summary: string; load: () => Promise<Command> }> = {
  webhook: {
    summary: 'serve the mutating and validating admission webhook over HTTPS',
    load: async () => (await import('../webhook/cli.ts')).webhookCommand,
  },
  agent: {
    summary: 'program flowtable offload for hinted Services on this node',
    load: async () => (await import('../agent/cli.ts')).agentCommand,
  },
  status: {
    summary: "show the agent's node mode, devices, programmed Services and offloaded connections",
    load: async () => (await import('../agent/report/status-command.ts')).statusCommand,
  },
  cleanup: {
    summary: 'delete the table inet flowhint',
    load: async () => (await import('../agent/cli.ts')).cleanupCommand,
  },
  explain: {
    summary:
      "what happens to a Service's hint: accepted, programmed on which nodes, what is not offloadable, what to do",
    load: async () => (await import('./explain.ts')).explainCommand,
  },
  backfill: {
    summary: 'label already-annotated Services through the webhook defaulting; report invalid hints',
    load: async () => (await import('./backfill.ts')).backfillCommand,
  },
  demo: {
    summary: 'the whole flow locally (npm start): dev certs, webhook, examples, agent in a scratch netns',
    load: async () => (await import('./demo.ts')).demoCommand,
  },
  certs: {
    summary: 'generate a CA and a webhook serving certificate; print the caBundle',
    load: async () => (await import('../certs/cli.ts')).certsCommand,
  },
};

function usage(): string {
  const lines = [
    ...Object.entries(COMMANDS).map(([name, c]) => `  ${name.padEnd(10)} ${c.summary}`),
    `  ${'version'.padEnd(10)} print the version`,
  ];
  return `usage: flowhint <command> [flags]\n\ncommands:\n${lines.join('\n')}\n\nRun \`flowhint <command> --help\` for a command's flags.\n`;
}

async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    process.stdout.write(usage());
    return name === undefined ? 2 : 0;
  }
  if (name === 'version' || name === '--version') {
    process.stdout.write(`flowhint ${flowhintVersion()} (node ${process.version})\n`);
    return 0;
  }
  const command = COMMANDS[name];
  if (!command) {
    const guess = closest(name, [...Object.keys(COMMANDS), 'version']);
    const hint = guess ? `; did you mean ${JSON.stringify(guess)}?` : '';
    process.stderr.write(`flowhint: FH_USAGE: unknown command ${JSON.stringify(name)}${hint}\n${usage()}`);
    return 2;
  }
  return (await command.load())(rest);
}

/** Whatever a command left open, the process ends within seconds of its result. */
function exitSoon(): void {
  setTimeout(() => process.exit(), 3_000).unref();
}

main(process.argv.slice(2)).then(
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

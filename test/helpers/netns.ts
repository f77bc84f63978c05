/**
 * Scratch network namespaces for integration tests: never the host's own ruleset.
 * Each test gets a fresh namespace with a veth pair, removed at teardown.
 */
import { execFileSync } from 'node:child_process';
import { makeRunner, type Runner } from '../../lib/exec.ts';

let counter = 0;

export interface Netns {
  name: string;
  run: Runner;
  sh(...argv: string[]): string;
  destroy(): void;
}

export function requireRoot(): void {
  if (process.getuid?.() !== 0)
    throw new Error('network-namespace tests need root (and nft, ip): run as root, as CI does');
}

export function createNetns(): Netns {
  requireRoot();
  const name = `fh-test-${process.pid}-${counter++}`;
  const exec = (...argv: string[]) => execFileSync(argv[0]!, argv.slice(1), { encoding: 'utf8' });
  exec('ip', 'netns', 'add', name);
  const sh = (...argv: string[]) => exec('ip', 'netns', 'exec', name, ...argv);
  sh('ip', 'link', 'set', 'lo', 'up');
  sh('ip', 'link', 'add', 'eth0', 'type', 'veth', 'peer', 'name', 'eth1');
  sh('ip', 'addr', 'add', '192.0.2.1/24', 'dev', 'eth0');
  sh('ip', 'link', 'set', 'eth0', 'up');
  sh('ip', 'link', 'set', 'eth1', 'up');
  return {
    name,
    run: makeRunner(['ip', 'netns', 'exec', name]),
    sh,
    destroy: () => {
      try {
        exec('ip', 'netns', 'del', name);
      } catch {
        /* already gone */
      }
    },
  };
}

#!/usr/bin/env node
/**
 * flowhint: per-Service flowtable offload for Kubernetes.
 * Subcommands load their module on demand, so `flowhint certs` never loads the agent.
 */
import { CLIENT_COMMANDS, runCommandLine, type Commands } from './dispatch.ts';

const COMMANDS: Commands = {
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
    summary: 'delete the tables inet, ip and ip6 flowhint',
    load: async () => (await import('../agent/cli.ts')).cleanupCommand,
  },
  ...CLIENT_COMMANDS,
  demo: {
    summary: 'the whole flow locally (npm start): dev certs, webhook, examples, agent in a scratch netns',
    load: async () => (await import('./demo.ts')).demoCommand,
  },
  certs: {
    summary: 'generate a CA and a webhook serving certificate; print the caBundle',
    load: async () => (await import('../certs/cli.ts')).certsCommand,
  },
};

runCommandLine('flowhint', COMMANDS);

#!/usr/bin/env node
/**
 * The kubectl plugin: kubectl runs `kubectl-flowhint` from PATH for `kubectl flowhint …`,
 * with the arguments that follow, so `kubectl flowhint explain shop/cart` is
 * `flowhint explain shop/cart`. Only the client-side commands (explain, backfill): the rest
 * run on nodes or in the cluster. Bundled into one file that runs on Node 20 without a
 * checkout by `npm run build` (plugin/build.ts). Install: README, "See it from kubectl".
 */
import { CLIENT_COMMANDS, runCommandLine } from './dispatch.ts';

runCommandLine('kubectl flowhint', CLIENT_COMMANDS);

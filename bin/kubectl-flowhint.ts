#!/usr/bin/env node
/**
 * The kubectl plugin: kubectl runs `kubectl-flowhint` from PATH for `kubectl flowhint …`,
 * with the arguments that follow, so `kubectl flowhint explain shop/cart` is
 * `flowhint explain shop/cart`. Install: README, "kubectl flowhint".
 */
import './flowhint.ts';

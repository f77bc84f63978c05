/** The hint API: pure functions, no I/O. Imported by the webhook and the agent alike. */
export * from './keys.ts';
export * from './service.ts';
export * from './service-view.ts';
export * from './defaulting.ts';
export * from './validation.ts';
export * from './reader.ts';
export * from './admit.ts';
export * from './flowhint-node.ts';

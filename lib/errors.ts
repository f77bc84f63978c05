/**
 * Errors with stable codes that say what to do, in the manner of fastify's FST_ERR_*.
 * The code is for machines and docs (README, troubleshooting); the message is for people.
 */
export class FlowhintError extends Error {
  readonly code: string;
  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
    this.name = 'FlowhintError';
  }
}

export function errorMessage(err: unknown): string {
  if (err instanceof Error) return err.message;
  return String(err);
}

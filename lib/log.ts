/** pino JSON logs for every component. One logger per process, children per concern. */
import { pino, type Logger, type LevelWithSilent } from 'pino';

export type { Logger };

export function createLogger(
  name: string,
  level: LevelWithSilent = (process.env.FLOWHINT_LOG_LEVEL as LevelWithSilent | undefined) ?? 'info',
): Logger {
  return pino({ name, level, base: { component: name } });
}

/** A logger that discards everything, for tests and dry runs. */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}

/**
 * pino JSON logs for every component. One logger per process, children per concern. Fields
 * are the same everywhere: `component` once, `level` as a word, `time` in ISO 8601, the error
 * text as `err` and a catalogue code as `code`.
 */
import { pino, type Logger, type LevelWithSilent } from 'pino';

export type { Logger };

export function createLogger(
  name: string,
  level: LevelWithSilent = (process.env.FLOWHINT_LOG_LEVEL as LevelWithSilent | undefined) ?? 'info',
): Logger {
  return pino({
    level,
    base: { component: name },
    formatters: { level: (label) => ({ level: label }) },
    timestamp: pino.stdTimeFunctions.isoTime,
  });
}

/** A logger that discards everything, for tests and dry runs. */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}

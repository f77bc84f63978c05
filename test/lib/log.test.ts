/** The log line's fields, as an operator's log pipeline reads them. */
import t from 'tap';
import { spawnSync } from 'node:child_process';

t.test('component once, the level as a word, ISO 8601 time', async (t) => {
  const r = spawnSync(
    process.execPath,
    [
      '--input-type=module',
      '-e',
      "import { createLogger } from './lib/log.ts'; createLogger('flowhint-agent').warn({ code: 'FH_X', err: 'boom' }, 'hello');",
    ],
    { encoding: 'utf8' },
  );
  const line = JSON.parse(r.stdout.trim()) as Record<string, unknown>;
  t.equal(line.component, 'flowhint-agent');
  t.notOk('name' in line, 'no second name for the component');
  t.equal(line.level, 'warn');
  t.match(line.time, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
  t.match(line, { code: 'FH_X', err: 'boom', msg: 'hello' });
});

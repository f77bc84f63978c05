import t from 'tap';
import { spawn } from 'node:child_process';
import { acquireInstanceLock } from '../../lib/instance-lock.ts';
import { eventually } from '../helpers/eventually.ts';

const name = `flowhint-test-${process.pid}`;

t.test('a second holder is refused with a stable code; release frees it', async (t) => {
  const a = await acquireInstanceLock(name);
  await t.rejects(acquireInstanceLock(name), { code: 'FH_AGENT_RUNNING' });
  await a.release();
  const b = await acquireInstanceLock(name);
  await b.release();
});

t.test('kill -9 of the holder frees the lock: no stale lock to clean up', async (t) => {
  const lockName = `${name}-child`;
  const child = spawn(
    process.execPath,
    [
      '--input-type=module',
      '-e',
      `import('${new URL('../../lib/instance-lock.ts', import.meta.url).href}').then(async (m) => { await m.acquireInstanceLock('${lockName}'); console.log('held'); setInterval(() => {}, 1000); })`,
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  await new Promise<void>((r) => child.stdout.once('data', () => r()));
  await t.rejects(acquireInstanceLock(lockName), { code: 'FH_AGENT_RUNNING' }, 'held by the child');
  child.kill('SIGKILL');
  await new Promise((r) => child.once('exit', r));
  const lock = await eventually('the lock, once its holder was killed', () =>
    acquireInstanceLock(lockName).catch(() => undefined),
  );
  await lock.release();
});

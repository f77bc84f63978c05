/**
 * One agent per node (per network namespace it programs): an abstract Unix socket, bound in
 * the network namespace the process runs in. The kernel frees it when the process dies, even
 * by kill -9, so there is no stale lock file to clean; and, unlike a pid file, it works across
 * the pid namespaces of a DaemonSet's old and new Pods (both hostNetwork).
 */
import { createServer, type Server } from 'node:net';
import { FlowhintError } from './errors.ts';

export interface InstanceLock {
  release(): Promise<void>;
}

export async function acquireInstanceLock(name: string): Promise<InstanceLock> {
  if (!/^[A-Za-z0-9_.:-]+$/.test(name)) throw new Error(`bad lock name ${name}`);
  const server: Server = createServer((c) => c.destroy());
  await new Promise<void>((resolve, reject) => {
    server.once('error', (err: NodeJS.ErrnoException) => {
      if (err.code === 'EADDRINUSE') {
        reject(
          new FlowhintError(
            'FH_AGENT_RUNNING',
            `another flowhint agent already runs here (lock ${JSON.stringify(name)}); two agents would fight over table inet flowhint. Stop it first, or use --netns for another namespace`,
          ),
        );
      } else reject(err);
    });
    server.listen(`\0${name}`, () => resolve());
  });
  server.unref();
  return { release: () => new Promise<void>((r) => server.close(() => r())) };
}

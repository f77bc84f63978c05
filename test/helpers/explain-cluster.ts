/**
 * A cluster for `flowhint explain` run as a user runs it: the FAKE API server with one
 * Service (shop/cart, LongLived) and two Nodes whose agents are alive (node-b degraded), and
 * a kubeconfig for it whose context's namespace is shop. `run` starts the CLI (or any
 * command, such as kubectl or the packed plugin) as a child process.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FakeApiServer } from './fake-apiserver.ts';
import type { Obj } from './fake-kube.ts';
import { FakeFlowhintNodes } from './fake-flowhintnodes.ts';
import { fakeKubeConfig } from './fake-kube.ts';
import { svc } from './agent.ts';
import { SOURCE_ENTRY } from './child.ts';
import { nodeStatusFixture } from './flowhint-node.ts';

/** A live agent's status: its heartbeat written now (explain judges it against the real clock). */
export const liveStatus = () => ({ ...nodeStatusFixture(), heartbeatTime: new Date().toISOString() });

export async function explainCluster(t: { teardown: (fn: () => unknown) => void }) {
  const api = new FakeApiServer();
  await api.start();
  const fhn = new FakeFlowhintNodes(api);
  const dir = mkdtempSync(join(tmpdir(), 'flowhint-explain-'));
  t.teardown(async () => {
    await api.stop();
    rmSync(dir, { recursive: true, force: true });
  });
  const kubeconfig = join(dir, 'kubeconfig');
  const kc = fakeKubeConfig(api.url);
  kc.contexts[0] = { ...kc.contexts[0]!, namespace: 'shop' };
  writeFileSync(kubeconfig, kc.exportConfig());
  api.apply(svc({ namespace: 'shop', name: 'cart' }) as Obj);
  for (const n of ['node-a', 'node-b']) {
    fhn.addNode(n);
    fhn.put(n, { metadata: { name: n } }, 'flowhint-agent');
    fhn.put(n, { status: liveStatus() }, 'flowhint-agent', 'status');
  }
  fhn.put(
    'node-b',
    {
      status: {
        ...liveStatus(),
        support: { ...liveStatus().support, offload: 'Degraded', reason: 'no nf_flow_table' },
      },
    },
    'flowhint-agent',
    'status',
  );
  // Asynchronous: the fake API server answers from this process.
  const run = (args: string[], cmd = process.execPath, env: NodeJS.ProcessEnv = {}) =>
    new Promise<{ code: number | null; out: string; err: string }>((resolve) => {
      execFile(
        cmd,
        cmd === process.execPath ? [SOURCE_ENTRY, ...args] : args,
        { encoding: 'utf8', env: { ...process.env, KUBECONFIG: kubeconfig, ...env } },
        (error, out, err) => {
          resolve({ code: error ? (typeof error.code === 'number' ? error.code : null) : 0, out, err });
        },
      );
    });
  return { api, fhn, dir, run };
}

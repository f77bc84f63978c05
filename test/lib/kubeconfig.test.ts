/** loadKubeConfig: the file's current context, or the one --context names. */
import t from 'tap';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadKubeConfig } from '../../lib/kubeconfig.ts';
import { FlowhintError } from '../../lib/errors.ts';

function kubeconfig(): string {
  const dir = mkdtempSync(join(tmpdir(), 'flowhint-kubeconfig-'));
  const file = join(dir, 'config');
  writeFileSync(
    file,
    [
      'apiVersion: v1',
      'kind: Config',
      'clusters:',
      '- {name: one, cluster: {server: "https://one.example:6443"}}',
      '- {name: two, cluster: {server: "https://two.example:6443"}}',
      'users:',
      '- {name: u, user: {token: x}}',
      'contexts:',
      '- {name: first, context: {cluster: one, user: u, namespace: shop}}',
      '- {name: second, context: {cluster: two, user: u, namespace: infra}}',
      'current-context: first',
      '',
    ].join('\n'),
  );

  return file;
}

t.test('the current context by default, the named one with a context', async (t) => {
  const file = kubeconfig();
  t.equal(loadKubeConfig(file).getCurrentCluster()?.server, 'https://one.example:6443');
  const kc = loadKubeConfig(file, 'second');
  t.equal(kc.getCurrentCluster()?.server, 'https://two.example:6443');
  t.equal(kc.getContextObject(kc.getCurrentContext())?.namespace, 'infra', "that context's namespace");
});

t.test('a context the file does not have: a catalogue error naming the ones it has', async (t) => {
  const file = kubeconfig();
  t.throws(() => loadKubeConfig(file, 'third'), FlowhintError);
  try {
    loadKubeConfig(file, 'third');
  } catch (err) {
    t.equal((err as FlowhintError).code, 'FH_KUBECONFIG_INVALID');
    t.match((err as Error).message, `has no context "third" (it has: first, second)`);
  }
});

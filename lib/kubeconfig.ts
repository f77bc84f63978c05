/** Where a client of the API server finds it; shared by the agent and `flowhint backfill`. */
import { existsSync } from 'node:fs';
import { KubeConfig } from '@kubernetes/client-node';
import { FlowhintError, errorMessage } from './errors.ts';

/**
 * In-cluster when running in a Pod, else `KUBECONFIG` or ~/.kube/config; a catalogue error
 * when there is none, or it cannot be read. `context` picks one of the file's contexts
 * instead of its current one (kubectl does not pass its own --context to plugins).
 */
export function loadKubeConfig(kubeconfigPath?: string, context?: string): KubeConfig {
  const kc = new KubeConfig();
  const file = kubeconfigPath ?? process.env.KUBECONFIG;
  const inCluster = process.env.KUBERNETES_SERVICE_HOST !== undefined;
  const home = `${process.env.HOME ?? ''}/.kube/config`;
  if (!file && !inCluster && !existsSync(home)) {
    throw new FlowhintError(
      'FH_NO_KUBECONFIG',
      'no kubeconfig: not in a cluster, KUBECONFIG is unset and ~/.kube/config does not exist; pass --kubeconfig (or --services-dir for the agent)',
    );
  }
  try {
    if (kubeconfigPath) kc.loadFromFile(kubeconfigPath);
    else kc.loadFromDefault();
  } catch (err) {
    throw new FlowhintError(
      'FH_KUBECONFIG_INVALID',
      `cannot load kubeconfig ${file ?? home}: ${errorMessage(err).split('\n')[0] ?? ''}`,
    );
  }
  if (context !== undefined) {
    if (!kc.getContextObject(context))
      throw new FlowhintError(
        'FH_KUBECONFIG_INVALID',
        `kubeconfig ${file ?? home} has no context ${JSON.stringify(context)} (it has: ${kc.contexts.map((c) => c.name).join(', ') || 'none'})`,
      );
    kc.setCurrentContext(context);
  }
  if (!kc.getCurrentCluster())
    throw new FlowhintError('FH_KUBECONFIG_INVALID', `kubeconfig ${file ?? home} names no current cluster`);
  return kc;
}

/** Where a client of the API server finds it; shared by the agent and `flowhint backfill`. */
import { KubeConfig } from '@kubernetes/client-node';

/** In-cluster when running in a Pod, else `KUBECONFIG` or ~/.kube/config. */
export function loadKubeConfig(kubeconfigPath?: string): KubeConfig {
  const kc = new KubeConfig();
  if (kubeconfigPath) kc.loadFromFile(kubeconfigPath);
  else kc.loadFromDefault();
  return kc;
}

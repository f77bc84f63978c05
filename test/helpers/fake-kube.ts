/** For the FAKE API server (fake-apiserver.ts): its objects, label selectors, and a kubeconfig that points at it. */
import { KubeConfig } from '@kubernetes/client-node';

export type Obj = {
  metadata: { name: string; namespace: string; labels?: Record<string, string>; resourceVersion?: string };
  [k: string]: unknown;
};

/** Whether `o` matches a label selector of `key` (exists) and `key=value` terms. */
export function matches(o: Obj | undefined, selector: string | undefined): boolean {
  if (!o) return false;
  if (!selector) return true;
  return selector.split(',').every((term) => {
    const [k, v] = term.split('=');
    const have = o.metadata.labels?.[k!];
    return v === undefined ? have !== undefined : have === v;
  });
}

/** A kubeconfig for the fake, as the agent would load one. */
export function fakeKubeConfig(url: string): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'fake', server: url, skipTLSVerify: true }],
    users: [{ name: 'u', token: 'x' }],
    contexts: [{ name: 'c', cluster: 'fake', user: 'u' }],
    currentContext: 'c',
  });
  return kc;
}

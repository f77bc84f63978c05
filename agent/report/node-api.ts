/**
 * node-writer.ts's API calls over @kubernetes/client-node: read the Node (its uid, for the
 * owner reference), and server-side apply the FlowhintNode and its status with the field
 * manager `flowhint-agent`, forcing ownership as the API documents for controllers (the
 * agent is the only writer of these fields). Loaded only with the Kubernetes source.
 */
import { CoreV1Api, CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import {
  NODE_FIELD_MANAGER,
  NODE_GROUP,
  NODE_PLURAL,
  NODE_VERSION,
  flowhintNodeObject,
  flowhintNodeStatusObject,
} from '../../api/index.ts';
import { applyOptions, withSignal } from '../../lib/kube-request.ts';
import type { NodeStatusApi } from './node-writer.ts';

export function kubeNodeStatusApi(kc: KubeConfig): NodeStatusApi {
  const core = kc.makeApiClient(CoreV1Api);
  const custom = kc.makeApiClient(CustomObjectsApi);
  const at = (name: string) => ({
    group: NODE_GROUP,
    version: NODE_VERSION,
    plural: NODE_PLURAL,
    name,
    fieldManager: NODE_FIELD_MANAGER,
    force: true,
  });
  return {
    async nodeUid(node, signal) {
      const n = await core.readNode({ name: node }, withSignal(signal));
      const uid = n.metadata?.uid;
      if (!uid) throw new Error(`Node ${node} has no uid`);
      return uid;
    },
    async applyObject(node, uid, signal) {
      await custom.patchClusterCustomObject({ ...at(node), body: flowhintNodeObject(node, uid) }, applyOptions(signal));
    },
    async applyStatus(node, status, signal) {
      await custom.patchClusterCustomObjectStatus(
        { ...at(node), body: flowhintNodeStatusObject(node, status) },
        applyOptions(signal),
      );
    },
  };
}

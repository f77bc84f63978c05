/**
 * api/flowhint-node.ts: the objects the agent applies, checked against the CRD file (group,
 * version, kind), and the words the API gives each kube-proxy mode.
 */
import t from 'tap';
import { readFileSync } from 'node:fs';
import { load } from 'js-yaml';
import {
  KUBE_PROXY_MEANING,
  KUBE_PROXY_MODES,
  NODE_FIELD_MANAGER,
  flowhintNodeObject,
  flowhintNodeStatusObject,
} from '../../api/index.ts';
import { nodeStatusFixture } from '../helpers/flowhint-node.ts';

const crd = load(readFileSync(new URL('../../manifests/base/crd.yaml', import.meta.url), 'utf8')) as {
  spec: { group: string; names: { kind: string }; versions: Array<{ name: string }> };
};
const apiVersion = `${crd.spec.group}/${crd.spec.versions[0]?.name ?? ''}`;

t.test('the object: its name and an owner reference to its Node', async (t) => {
  t.strictSame(flowhintNodeObject('node-a', 'uid-1'), {
    apiVersion,
    kind: crd.spec.names.kind,
    metadata: { name: 'node-a', ownerReferences: [{ apiVersion: 'v1', kind: 'Node', name: 'node-a', uid: 'uid-1' }] },
  });
});

t.test('the status object: name and status only', async (t) => {
  const status = nodeStatusFixture();
  t.strictSame(flowhintNodeStatusObject('node-a', status), {
    apiVersion,
    kind: crd.spec.names.kind,
    metadata: { name: 'node-a' },
    status,
  });
});

t.test('the field manager is the one docs/api.md names', async (t) => {
  t.equal(NODE_FIELD_MANAGER, 'flowhint-agent');
  const docs = readFileSync(new URL('../../docs/api.md', import.meta.url), 'utf8').replace(/\s+/g, ' ');
  t.ok(docs.includes(`field manager \`${NODE_FIELD_MANAGER}\``), 'docs/api.md names it');
});

t.test('each kube-proxy mode has its own meaning; IPVS says its ports are never offloaded', async (t) => {
  const meanings = KUBE_PROXY_MODES.map((m) => KUBE_PROXY_MEANING[m]);
  t.equal(new Set(meanings).size, KUBE_PROXY_MODES.length);
  t.match(KUBE_PROXY_MEANING.nftables, /nftables/);
  t.match(KUBE_PROXY_MEANING.iptables, /iptables/);
  t.match(KUBE_PROXY_MEANING.ipvs, /never offloaded/);
  t.match(KUBE_PROXY_MEANING.unknown, /no kube-proxy rules/);
});

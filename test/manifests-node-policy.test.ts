/**
 * The policy that keeps each agent to its own node's FlowhintNode
 * (manifests/base/agent-node-policy.yaml), its CEL evaluated with a CEL library against
 * admission requests written by hand, as the API server builds them: the user, with the
 * node claim that a Pod-bound ServiceAccount token carries, and the object.
 */
import t from 'tap';
import { readFileSync } from 'node:fs';
import { loadAll } from 'js-yaml';
import { run } from '@bufbuild/cel';
import { toCel } from './helpers/cel.ts';

type Obj = Record<string, any>;
const docs = (
  loadAll(readFileSync(new URL('../manifests/base/agent-node-policy.yaml', import.meta.url), 'utf8')) as Obj[]
).filter(Boolean);
const policy = docs.find((d) => d.kind === 'ValidatingAdmissionPolicy')!;
const binding = docs.find((d) => d.kind === 'ValidatingAdmissionPolicyBinding')!;

const CLAIM = 'authentication.kubernetes.io/node-name';
const AGENT = 'system:serviceaccount:flowhint-system:flowhint-agent';

/** The policy's answer: true (allowed), or the denial's message. */
function decide(username: string, extra: Obj | undefined, name: string): true | string {
  const request = { userInfo: { username, groups: ['system:serviceaccounts'], ...(extra ? { extra } : {}) } };
  const base = { request: toCel(request), object: toCel({ metadata: { name } }), oldObject: null };
  const spec = policy.spec;
  if (!spec.matchConditions.every((m: Obj) => run(m.expression, base as never) === true)) return true;
  const variables = new Map<string, unknown>();
  for (const v of spec.variables) variables.set(v.name, run(v.expression, { ...base, variables } as never));
  for (const v of spec.validations)
    if (run(v.expression, { ...base, variables } as never) !== true) {
      const message = run(v.messageExpression, { ...base, variables } as never);
      return typeof message === 'string' ? message : `not a string: ${typeof message}`;
    }
  return true;
}

t.test('an agent with a node claim: its own node only', async (t) => {
  t.equal(decide(AGENT, { [CLAIM]: ['node-a'] }, 'node-a'), true, 'its own FlowhintNode');
  t.equal(
    decide(AGENT, { [CLAIM]: ['node-a'] }, 'node-b'),
    'this agent runs on node node-a and may write only the FlowhintNode of that name, not node-b',
  );
  t.not(
    decide('system:serviceaccount:elsewhere:flowhint-agent', { [CLAIM]: ['node-a'] }, 'node-b'),
    true,
    'moved by an overlay',
  );
});

t.test('let through: no node claim (older clusters, unbound tokens), and everyone else', async (t) => {
  t.equal(decide(AGENT, undefined, 'node-b'), true, 'no extra at all');
  t.equal(decide(AGENT, { 'other/key': ['x'] }, 'node-b'), true, 'no node claim');
  t.equal(decide(AGENT, { [CLAIM]: [] }, 'node-b'), true, 'an empty claim');
  t.equal(decide('kubernetes-admin', { [CLAIM]: ['node-a'] }, 'node-b'), true, 'an administrator');
  t.equal(decide('system:serviceaccount:flowhint-system:default', { [CLAIM]: ['node-a'] }, 'node-b'), true);
});

t.test('what it covers, and that it is enforced', async (t) => {
  const rules = policy.spec.matchConstraints.resourceRules;
  t.same(
    rules.map((r: Obj) => [r.apiGroups, r.operations, r.resources]),
    [[['flowhint.dev'], ['CREATE', 'UPDATE'], ['flowhintnodes', 'flowhintnodes/status']]],
  );
  t.equal(policy.spec.failurePolicy, 'Fail');
  t.equal(binding.spec.policyName, policy.metadata.name);
  t.same(binding.spec.validationActions, ['Deny']);
});

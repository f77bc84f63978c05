/**
 * `flowhint explain NAMESPACE/NAME` (also `kubectl flowhint explain`, bin/kubectl-flowhint.ts):
 * reads the Service, every FlowhintNode and the Nodes that should run the agent, and says
 * what happens to its hint (bin/explanation.ts). The API calls are behind `ExplainApi`, as
 * backfill's are. A read that is refused (403) is said, and the rest answered.
 */
import { CoreV1Api, CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import { z } from 'zod';
import { FlowhintNode, NODE_GROUP, NODE_PLURAL, NODE_VERSION } from '../api/index.ts';
import { parseFlags } from '../lib/cli.ts';
import { FlowhintError, errorMessage, httpStatus } from '../lib/errors.ts';
import { deadline, metadataOnly } from '../lib/kube-request.ts';
import { loadKubeConfig } from '../lib/kubeconfig.ts';
import { flowhintVersion } from '../lib/version.ts';
import { explain, formatExplanation } from './explanation.ts';

/** What went wrong reading from `server`, in words: the refused permission, or the cause of a failed request. */
export function apiFailure(err: unknown, server: string, namespace: string): string {
  if (httpStatus(err) === 403)
    return `${server} refused to show the Service: you may not get services in namespace ${namespace}`;
  const cause = (err as { cause?: { code?: unknown; message?: unknown } } | null)?.cause;
  const why = typeof cause?.code === 'string' ? cause.code : typeof cause?.message === 'string' ? cause.message : '';
  return `cannot read from the API server ${server}: ${errorMessage(err).split('\n')[0] ?? ''}${why ? ` (${why})` : ''}`;
}

/** The part of the API explain reads. */
export interface ExplainApi {
  /** The Service, or undefined when there is none. */
  service(namespace: string, name: string): Promise<unknown>;
  /** Every FlowhintNode, 'crd-absent', or 'forbidden' when the caller may not list them. */
  flowhintNodes(): Promise<FlowhintNode[] | 'crd-absent' | 'forbidden'>;
  /** The names of the Nodes that should run the agent, or 'forbidden'. */
  nodes(): Promise<string[] | 'forbidden'>;
}

/** The agent DaemonSet's nodeSelector (manifests/base/agent.yaml): the Nodes that should run it. */
export const AGENT_NODE_SELECTOR = 'kubernetes.io/os=linux';

const REQUEST_TIMEOUT_MS = 30_000;

export function kubeExplainApi(kc: KubeConfig): ExplainApi {
  const core = kc.makeApiClient(CoreV1Api);
  const custom = kc.makeApiClient(CustomObjectsApi);
  return {
    async service(namespace, name) {
      try {
        return await core.readNamespacedService({ namespace, name }, deadline(REQUEST_TIMEOUT_MS));
      } catch (err) {
        if (httpStatus(err) === 404) return undefined;
        throw err;
      }
    },
    async nodes() {
      try {
        // Names only: metadata, not every Node's status (its images list is kilobytes per node).
        const list = await core.listNode(
          { labelSelector: AGENT_NODE_SELECTOR },
          metadataOnly(deadline(REQUEST_TIMEOUT_MS)),
        );
        return list.items.map((n) => n.metadata?.name ?? '').filter((n) => n !== '');
      } catch (err) {
        if (httpStatus(err) === 403) return 'forbidden';
        throw err;
      }
    },
    async flowhintNodes() {
      let list: unknown;
      try {
        list = await custom.listClusterCustomObject(
          { group: NODE_GROUP, version: NODE_VERSION, plural: NODE_PLURAL },
          deadline(REQUEST_TIMEOUT_MS),
        );
      } catch (err) {
        if (httpStatus(err) === 404) return 'crd-absent';
        // FlowhintNodes are cluster-scoped: `view` through a RoleBinding does not reach them.
        if (httpStatus(err) === 403) return 'forbidden';
        throw err;
      }
      // An object this version cannot read (an older or newer agent wrote it) counts as a
      // node without a status, not as no node.
      const items = z.object({ items: z.array(z.unknown()) }).parse(list).items;
      return items.flatMap((i) => {
        const p = FlowhintNode.safeParse(i);
        if (p.success) return [p.data];
        const name = z.object({ metadata: z.object({ name: z.string() }) }).safeParse(i);
        return name.success ? [{ metadata: name.data.metadata, unreadable: true }] : [];
      });
    },
  };
}

const USAGE = `usage: flowhint explain NAMESPACE/NAME [--namespace NS] [--output text] [--kubeconfig FILE] [--context NAME]
  What happens to a Service's traffic hint: accepted or not and why, on how many nodes it is
  programmed, which nodes are degraded, which ports are not offloadable where, and what to do.
  As a kubectl plugin: kubectl flowhint explain NAMESPACE/NAME (or NAME -n NAMESPACE).`;

const Flags = z
  .object({
    _: z.array(z.string()),
    namespace: z.string().min(1).optional(),
    output: z.enum(['text', 'json']).default('text'),
    kubeconfig: z.string().min(1).optional(),
    context: z.string().min(1).optional(),
  })
  .superRefine((f, ctx) => {
    const [target, ...extra] = f._;
    if (target === undefined || extra.length > 0)
      ctx.addIssue({ code: 'custom', path: [], message: 'name one Service: NAMESPACE/NAME, or NAME with --namespace' });
    else if (!/^([a-z0-9-]{1,63}\/)?[a-z0-9-]{1,63}$/.test(target))
      ctx.addIssue({ code: 'custom', path: [], message: `${JSON.stringify(target)} is not NAMESPACE/NAME or NAME` });
  });

/** Namespace and name from `NAMESPACE/NAME`, or `NAME` and --namespace or the kubeconfig's namespace. */
function target(arg: string, flag: string | undefined, kc: KubeConfig): { namespace: string; name: string } {
  const [a, b] = arg.split('/');
  if (b !== undefined) {
    if (flag !== undefined && flag !== a)
      throw new FlowhintError('FH_USAGE', `${arg} names namespace ${a ?? ''} but --namespace says ${flag}`);
    return { namespace: a ?? '', name: b };
  }
  const context = kc.getContextObject(kc.getCurrentContext());
  return { namespace: flag ?? context?.namespace ?? 'default', name: arg };
}

export async function explainCommand(argv: string[], api?: ExplainApi): Promise<number> {
  const f = parseFlags(
    argv,
    {
      namespace: { type: 'string', short: 'n', value: 'NS', help: "the namespace of NAME (default: the context's)" },
      output: { type: 'string', short: 'o', value: 'FORMAT', help: 'text or json', default: 'text' },
      context: { type: 'string', value: 'NAME', help: "the kubeconfig's context to use (default: its current one)" },
      kubeconfig: {
        type: 'string',
        value: 'FILE',
        help: 'the API server (default: in-cluster, else KUBECONFIG or ~/.kube/config)',
      },
    },
    Flags,
    USAGE,
    { positionals: true },
  );
  const kc = loadKubeConfig(f.kubeconfig, f.context);
  const { namespace, name } = target(f._[0] ?? '', f.namespace, kc);
  const client = api ?? kubeExplainApi(kc);
  const server = kc.getCurrentCluster()?.server ?? 'the API server';
  const [service, nodes, expected] = await Promise.all([
    client.service(namespace, name),
    client.flowhintNodes(),
    client.nodes(),
  ]).catch((err: unknown) => {
    throw new FlowhintError('FH_API_FAILED', apiFailure(err, server, namespace));
  });
  if (service === undefined) throw new FlowhintError('FH_SERVICE_NOT_FOUND', `service ${namespace}/${name} not found`);
  const e = explain(service, nodes, { nodes: expected, now: Date.now(), version: flowhintVersion() });
  process.stdout.write(f.output === 'json' ? `${JSON.stringify(e, null, 2)}\n` : formatExplanation(e));
  return 0;
}

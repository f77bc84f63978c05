/**
 * `flowhint backfill`: admission after the fact, for Services that carried the annotation
 * before flowhint was installed (nothing admits them until their next update). Each one
 * goes through the same api/ defaulting as /mutate, and is patched with that JSON Patch;
 * invalid ones are reported, not patched. A `test` operation on resourceVersion makes every
 * patch conditional, so a Service changed meanwhile is skipped, never overwritten.
 */
import { CoreV1Api, PatchStrategy, setHeaderOptions, type KubeConfig, type V1Service } from '@kubernetes/client-node';
import { z } from 'zod';
import { HINT_ANNOTATION, HINT_LABEL, THRESHOLD_ANNOTATION, admit, serviceKey } from '../api/index.ts';
import { errorMessage } from '../lib/errors.ts';
import { parseFlags } from '../lib/cli.ts';
import { loadKubeConfig } from '../lib/kubeconfig.ts';

export interface BackfillResult {
  service: string;
  outcome: 'patched' | 'unchanged' | 'invalid' | 'conflict' | 'failed';
  detail?: string;
}

/** The part of the API this needs: one page of Services, and a JSON Patch. */
export interface ServiceApi {
  list(cont: string | undefined): Promise<{ items: V1Service[]; cont: string | undefined }>;
  patch(namespace: string, name: string, ops: object[], dryRun: boolean): Promise<void>;
}

export function kubeServiceApi(kc: KubeConfig): ServiceApi {
  const api = kc.makeApiClient(CoreV1Api);
  return {
    async list(cont) {
      const r = await api.listServiceForAllNamespaces({ limit: 500, ...(cont ? { _continue: cont } : {}) });
      return { items: r.items, cont: r.metadata?._continue || undefined };
    },
    async patch(namespace, name, ops, dryRun) {
      await api.patchNamespacedService(
        { name, namespace, body: ops, fieldManager: 'flowhint-backfill', ...(dryRun ? { dryRun: 'All' } : {}) },
        setHeaderOptions('Content-Type', PatchStrategy.JsonPatch),
      );
    },
  };
}

function carriesKeys(s: V1Service): boolean {
  const a = s.metadata?.annotations ?? {};
  return HINT_ANNOTATION in a || THRESHOLD_ANNOTATION in a || HINT_LABEL in (s.metadata?.labels ?? {});
}

export async function backfill(api: ServiceApi, o: { dryRun: boolean }): Promise<BackfillResult[]> {
  const results: BackfillResult[] = [];
  let cont: string | undefined;
  do {
    const page = await api.list(cont);
    cont = page.cont;
    for (const svc of page.items.filter(carriesKeys)) {
      const service = serviceKey(svc.metadata ?? {});
      const d = admit(svc);
      if (!d.ok) {
        results.push({ service, outcome: 'invalid', detail: d.reason });
        continue;
      }
      if (d.patch.length === 0) {
        results.push({ service, outcome: 'unchanged' });
        continue;
      }
      const ops = [{ op: 'test', path: '/metadata/resourceVersion', value: svc.metadata?.resourceVersion }, ...d.patch];
      try {
        await api.patch(svc.metadata?.namespace ?? 'default', svc.metadata?.name ?? '', ops, o.dryRun);
        results.push({ service, outcome: 'patched', detail: JSON.stringify(d.patch) });
      } catch (err) {
        const code = (err as { code?: number }).code;
        results.push({
          service,
          outcome: code === 409 || code === 422 ? 'conflict' : 'failed',
          detail: errorMessage(err).slice(0, 300),
        });
      }
    }
  } while (cont);
  return results;
}

const USAGE =
  'usage: flowhint backfill [--kubeconfig FILE] [--context NAME] [--dry-run]\n  Labels already-annotated Services through the same defaulting as the webhook; reports invalid hints.';

export async function backfillCommand(argv: string[]): Promise<number> {
  const f = parseFlags(
    argv,
    {
      context: { type: 'string', value: 'NAME', help: "the kubeconfig's context to use (default: its current one)" },
      kubeconfig: {
        type: 'string',
        value: 'FILE',
        help: 'the API server (default: in-cluster, else KUBECONFIG or ~/.kube/config)',
      },
      'dry-run': { type: 'boolean', help: 'report what would be labelled, patch nothing' },
    },
    z.object({
      kubeconfig: z.string().optional(),
      context: z.string().min(1).optional(),
      'dry-run': z.boolean().default(false),
    }),
    USAGE,
  );
  const results = await backfill(kubeServiceApi(loadKubeConfig(f.kubeconfig, f.context)), { dryRun: f['dry-run'] });
  for (const r of results)
    process.stdout.write(`${r.outcome.toUpperCase().padEnd(9)} ${r.service}${r.detail ? `  ${r.detail}` : ''}\n`);
  const count = (k: BackfillResult['outcome']) => results.filter((r) => r.outcome === k).length;
  process.stdout.write(
    `backfill${f['dry-run'] ? ' (dry run)' : ''}: ${count('patched')} patched, ${count('unchanged')} unchanged, ${count('invalid')} invalid, ${count('conflict')} changed meanwhile (run again), ${count('failed')} failed\n`,
  );
  return count('failed') > 0 ? 1 : 0;
}

/**
 * The README's install steps, run as written where this machine can: `kustomize edit set
 * image` in an overlay points every flowhint container at the image you built, and the
 * uninstall's JSON Patch gives the agent `--cleanup-on-exit` (a flag it knows).
 */
import t from 'tap';
import { execFileSync, spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fjp from 'fast-json-patch';
import { loadAll } from 'js-yaml';
import { kustomizeBuild } from './helpers/kustomize.ts';
import { kustomizeCommand } from './setup/tools.ts';

const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8');
const ROOT = new URL('../', import.meta.url).pathname;

interface Container {
  name: string;
  image: string;
  args?: string[];
}
interface Workload {
  kind: string;
  metadata: { name: string };
  spec: { template: { spec: { containers: Container[] } } };
}
const workloads = (yaml: string) =>
  (loadAll(yaml) as Workload[]).filter((o) => ['Deployment', 'DaemonSet', 'Job'].includes(o.kind));

t.test('`kustomize edit set image` as the README writes it: every container runs the image you built', async (t) => {
  const line = /^kustomize edit set image (\S+)=(\S+)$/m.exec(readme);
  t.ok(line, 'the README shows it');
  t.equal(line?.[1], 'flowhint', 'for the placeholder the manifests name');
  const [, , image = ''] = line ?? [];
  const dir = mkdtempSync(join(tmpdir(), 'flowhint-install-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  cpSync(join(ROOT, 'manifests'), join(dir, 'manifests'), { recursive: true });
  // The self-managed overlay needs its certificates first, as the README makes them.
  const certs = spawnSync(
    process.execPath,
    [
      'bin/flowhint.ts',
      'certs',
      '--out',
      join(dir, 'manifests/overlays/self-managed/certs'),
      '--service',
      'flowhint-webhook',
    ],
    { encoding: 'utf8' },
  );
  t.equal(certs.status, 0, certs.stderr);
  for (const overlay of ['cert-manager', 'self-managed']) {
    const at = join(dir, 'manifests/overlays', overlay);
    const before = workloads(kustomizeBuild(at)).flatMap((w) => w.spec.template.spec.containers.map((c) => c.image));
    t.same([...new Set(before)], ['flowhint'], `${overlay}: the placeholder image until you set one`);
    execFileSync(
      kustomizeCommand() ?? 'kustomize',
      ['edit', 'set', 'image', (line?.[0] ?? '').split(' ').at(-1) ?? ''],
      { cwd: at },
    );
    const images = workloads(kustomizeBuild(at)).flatMap((w) => w.spec.template.spec.containers.map((c) => c.image));
    t.ok(images.length >= 2, `${overlay}: the webhook and the agent`);
    t.same([...new Set(images)], [image], `${overlay}: all run ${image}`);
  }
});

t.test("the README's uninstall patch adds --cleanup-on-exit to the agent, which accepts it", async (t) => {
  const patch = /-p '(\[.*\])'/.exec(readme)?.[1];
  t.ok(patch, 'the README shows the patch');
  const agent = workloads(kustomizeBuild(join(ROOT, 'manifests/overlays/cert-manager'))).find(
    (w) => w.kind === 'DaemonSet' && w.metadata.name === 'flowhint-agent',
  );
  t.ok(agent);
  const patched = fjp.applyPatch(structuredClone(agent), JSON.parse(patch ?? '[]') as fjp.Operation[]).newDocument;
  const args = patched?.spec.template.spec.containers[0]?.args ?? [];
  t.equal(args.at(-1), '--cleanup-on-exit');
  // The patched arguments parse: `--help` after them exits 0 only when every flag is known.
  const r = spawnSync(process.execPath, ['bin/flowhint.ts', ...args.filter((a) => a !== '--help'), '--help'], {
    encoding: 'utf8',
  });
  t.equal(r.status, 0, r.stderr);
});

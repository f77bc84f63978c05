/**
 * Layers point one way: api/ is pure (no I/O, imports only itself and lib/errors.ts); lib/
 * imports no component; webhook/ imports nothing from agent/; the agent imports no webhook.
 * Inside agent/, each folder imports only the folders below it:
 *   state/ (desired state, pure) < nft/ (transactions, rendering, the table) < host/ (the
 *   node: devices, conntrack, probes) < report/ (metrics, status); sources/ stands apart
 *   (api/ and lib/ only); agent.ts and cli.ts (with cli-flags.ts) at the top may import any of them.
 */
import t from 'tap';
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { join, normalize, dirname } from 'node:path';

const root = new URL('../', import.meta.url).pathname;

function sources(dir: string): string[] {
  return readdirSync(join(root, dir)).flatMap((name) => {
    const path = join(dir, name);
    return statSync(join(root, path)).isDirectory() ? sources(path) : path.endsWith('.ts') ? [path] : [];
  });
}

/** What a file imports: repo-relative paths of local modules, and bare package names. */
function imports(file: string): string[] {
  const text = readFileSync(join(root, file), 'utf8');
  return [...text.matchAll(/(?:^import[^'"]*|import\()\s*['"]([^'"]+)['"]/gm)].map((m) =>
    m[1]!.startsWith('.') ? normalize(join(dirname(file), m[1]!)) : m[1]!,
  );
}

const rules: Array<[string, (target: string) => boolean, string]> = [
  [
    'api',
    (x) => x.startsWith('api/') || x === 'lib/errors.ts' || ['zod', 'fast-json-patch'].includes(x),
    'api/ is pure: itself, lib/errors.ts, zod, fast-json-patch',
  ],
  ['lib', (x) => !/^(api|agent|webhook|certs|bin)\//.test(x), 'lib/ imports no component'],
  ['webhook', (x) => !x.startsWith('agent/'), 'webhook/ imports nothing from agent/'],
  ['agent', (x) => !x.startsWith('webhook/'), 'agent/ imports nothing from webhook/'],
];

/** Agent folders, lowest first, with what each may import besides itself, api/, lib/ and packages. */
const agentLayers: Array<[string, string[]]> = [
  ['state', []],
  ['nft', ['state']],
  ['host', ['state', 'nft']],
  ['report', ['state', 'nft', 'host']],
  ['sources', []],
];
for (const [layer, below] of agentLayers) {
  rules.push([
    `agent/${layer}`,
    (x) => !x.startsWith('agent/') || x.startsWith(`agent/${layer}/`) || below.some((b) => x.startsWith(`agent/${b}/`)),
    `agent/${layer}/ imports ${below.length > 0 ? `only ${below.map((b) => `agent/${b}/`).join(', ')}` : 'no other agent folder'}`,
  ]);
}

t.test('agent/ holds only its folders and the top (agent.ts, cli.ts and its flags)', async (t) => {
  const top = readdirSync(join(root, 'agent')).sort();
  t.same(top, ['agent.ts', 'cli-flags.ts', 'cli.ts', ...agentLayers.map(([l]) => l)].sort());
});

for (const [dir, allowed, what] of rules) {
  t.test(what, async (t) => {
    const bad = sources(dir).flatMap((f) =>
      imports(f)
        .filter((x) => !allowed(x))
        .map((x) => `${f} -> ${x}`),
    );
    t.same(bad, []);
  });
}

/**
 * The system tools `npm test` needs, where they come from, and how to get them on a fresh
 * machine of this project's kind (Debian bookworm, root, Node from the project).
 *
 * - `nft`, `ip`, `conntrack`: the network-namespace tests program real rulesets. Debian's
 *   `nftables`, `iproute2`, `conntrack`.
 * - `iptables-restore`: kube-proxy's iptables-mode rules (iptables-nft) are loaded into a
 *   scratch namespace, as the real-kernel suite runs them beside flowhint. Debian's `iptables`.
 * - `kustomize`: the manifest tests build every overlay. Bookworm's own kubectl
 *   (`kubernetes-client` 1.20) carries a kustomize too old for `components`, and plain Debian
 *   has no `kubectl` package. Debian sid carries `kustomize` 5.x, a static Go binary: it is
 *   fetched with `apt-get download` through a private package list (the machine's own
 *   archive address with the suite `sid`; the machine's apt sources are not changed) and
 *   unpacked with `dpkg -x` into the git-ignored `.cache/tools`, the way the kernel suite
 *   gets its kernel. A `kustomize` already on PATH is used when it is there.
 * - `promtool`: the metrics tests check both exporters with Prometheus' own linter. It comes
 *   in bookworm's `prometheus` package, which would also install and start a server: the
 *   package is fetched with `apt-get download` and only unpacked (`dpkg -x`) into
 *   `.cache/tools`. A `promtool` already on PATH is used when it is there.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const REPO = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const TOOLS = join(REPO, '.cache', 'tools');
const KUSTOMIZE_LOCAL = join(TOOLS, 'kustomize', 'usr', 'bin', 'kustomize');
const PROMTOOL_LOCAL = join(TOOLS, 'prometheus', 'usr', 'bin', 'promtool');

/** The promtool the metrics tests use: the project's own copy, else one on PATH. */
export function promtoolCommand(): string | undefined {
  if (existsSync(PROMTOOL_LOCAL)) return PROMTOOL_LOCAL;
  return onPath('promtool') ? 'promtool' : undefined;
}

/** bookworm's `prometheus` package, downloaded and unpacked (never installed) for its promtool. */
export function fetchPromtool(): string {
  const debs = join(TOOLS, 'debs');
  rmSync(debs, { recursive: true, force: true });
  mkdirSync(debs, { recursive: true });
  const download = () => spawnSync('apt-get', ['-q', 'download', 'prometheus'], { cwd: debs, encoding: 'utf8' });
  if (download().status !== 0) {
    run('apt-get', ['-q', 'update']);
    run('apt-get', ['-q', 'download', 'prometheus'], debs);
  }
  const deb = readdirSync(debs).find((f) => /^prometheus_.*\.deb$/.test(f));
  if (!deb) throw new ToolError('apt-get download prometheus produced no .deb');
  const into = join(TOOLS, 'prometheus');
  rmSync(into, { recursive: true, force: true });
  run('dpkg', ['-x', join(debs, deb), into]);
  rmSync(debs, { recursive: true, force: true });
  if (!existsSync(PROMTOOL_LOCAL)) throw new ToolError(`${deb} has no usr/bin/promtool`);
  return PROMTOOL_LOCAL;
}

export interface Tool {
  readonly command: string;
  readonly pkg: string;
  readonly why: string;
}

/** Tools that Debian's own (bookworm) packages provide. */
export const APT_TOOLS: readonly Tool[] = [
  { command: 'nft', pkg: 'nftables', why: 'the network-namespace tests program real rulesets' },
  { command: 'ip', pkg: 'iproute2', why: 'the tests make scratch network namespaces' },
  { command: 'conntrack', pkg: 'conntrack', why: 'the agent reads offloaded connections' },
  {
    command: 'iptables-restore',
    pkg: 'iptables',
    why: "kube-proxy's iptables-mode rules are loaded beside flowhint's",
  },
];

export function onPath(command: string): boolean {
  return spawnSync('sh', ['-c', `command -v ${command}`], { stdio: 'ignore' }).status === 0;
}

/** The kustomize the manifest tests use: the project's own copy, else one on PATH. */
export function kustomizeCommand(): string | undefined {
  if (existsSync(KUSTOMIZE_LOCAL)) return KUSTOMIZE_LOCAL;
  return onPath('kustomize') ? 'kustomize' : undefined;
}

/** The machine's Debian archive address, from its own apt sources (deb822 or one-line). */
function archiveUri(): string | undefined {
  const files = [
    '/etc/apt/sources.list',
    ...(existsSync('/etc/apt/sources.list.d')
      ? readdirSync('/etc/apt/sources.list.d').map((f) => join('/etc/apt/sources.list.d', f))
      : []),
  ];
  for (const f of files) {
    if (!existsSync(f)) continue;
    const text = readFileSync(f, 'utf8');
    const uri =
      /^URIs:\s*(\S+\/debian)\/?\s*$/m.exec(text)?.[1] ??
      /^deb\s+(?:\[[^\]]*\]\s+)?(\S+\/debian)\/?\s+\S+/m.exec(text)?.[1];
    if (uri) return uri;
  }
  return undefined;
}

export class ToolError extends Error {}

/** spawnSync's output as text: undefined when the command cannot be spawned at all, whatever its type says. */
export function outputText(output: string | null | undefined): string {
  return output ?? '';
}

function run(cmd: string, args: string[], cwd?: string): void {
  const r = spawnSync(cmd, args, { cwd, encoding: 'utf8' });
  if (r.status !== 0)
    throw new ToolError(
      `${cmd} ${args.join(' ')} failed (${r.status ?? r.error?.message}): ${outputText(r.stderr).trim().split('\n').slice(-3).join(' ')}`,
    );
}

/**
 * A private package list for one Debian suite of the machine's own archive, in `apt` (made
 * empty first): the options that make apt-get and apt-cache use it, after `apt-get update`
 * with them. The machine's apt sources are not changed. `apt/debs` is for downloads.
 */
export function privateApt(apt: string, suite: string): string[] {
  const uri = archiveUri();
  if (!uri) throw new ToolError('cannot find the Debian archive address in /etc/apt/sources.list{,.d}');
  rmSync(apt, { recursive: true, force: true });
  for (const d of ['lists/partial', 'cache/archives/partial', 'debs']) mkdirSync(join(apt, d), { recursive: true });
  writeFileSync(
    join(apt, 'sources.list'),
    `deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] ${uri} ${suite} main\n`,
  );
  const o = [
    '-q',
    '-o',
    `Dir::Etc::SourceList=${join(apt, 'sources.list')}`,
    '-o',
    'Dir::Etc::SourceParts=/dev/null',
    '-o',
    `Dir::State::Lists=${join(apt, 'lists')}`,
    '-o',
    `Dir::Cache=${join(apt, 'cache')}`,
    '-o',
    'APT::Sandbox::User=root',
  ];
  run('apt-get', [...o, 'update']);
  return o;
}

/** Fetch Debian sid's kustomize into .cache/tools (see above). Returns its path. */
export function fetchKustomize(): string {
  const apt = join(TOOLS, 'apt-sid');
  const o = privateApt(apt, 'sid');
  run('apt-get', [...o, 'download', 'kustomize'], join(apt, 'debs'));
  const deb = readdirSync(join(apt, 'debs')).find((f) => /^kustomize_.*\.deb$/.test(f));
  if (!deb) throw new ToolError('apt-get download kustomize produced no .deb');
  const into = join(TOOLS, 'kustomize');
  rmSync(into, { recursive: true, force: true });
  run('dpkg', ['-x', join(apt, 'debs', deb), into]);
  rmSync(apt, { recursive: true, force: true });
  if (!existsSync(KUSTOMIZE_LOCAL)) throw new ToolError(`${deb} has no usr/bin/kustomize`);
  return KUSTOMIZE_LOCAL;
}

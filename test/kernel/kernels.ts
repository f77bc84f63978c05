/**
 * The kernels the real-kernel suite boots (issue 33), and how each is fetched.
 *
 * - `6.1`: Debian bookworm's, from the machine's own package lists; `6.12`: trixie's;
 *   `sid`: sid's newest. Each is found by name at run time (the kernel package that
 *   `linux-image-amd64` depends on in that suite), so "newest" stays new, fetched once with
 *   `apt-get download` (trixie and sid through a private package list of the machine's own
 *   archive, test/setup/tools.ts; the machine's apt sources are not changed), and unpacked
 *   with `dpkg -x` into the git-ignored `.cache/kernel/<id>`.
 * - Newer packages differ: trixie's and sid's modules are under /usr/lib/modules and
 *   xz-compressed (`.ko.xz`); sid splits the kernel into `linux-binary-*` (vmlinuz, under
 *   /usr/lib/modules/<release>), `linux-modules-*` and `linux-base-*` packages, and builds
 *   virtio in. The initrd's modules are the dependency closure of the 9p and virtio-pci
 *   drivers from the kernel's own modules.dep, minus what it builds in, decompressed.
 * - `KERNELS=6.1,sid` picks a subset; the default is all three (see run.ts).
 */
import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { basename, join } from 'node:path';
import { outputText, privateApt } from '../setup/tools.ts';

export const KERNEL_IDS = ['6.1', '6.12', 'sid'] as const;
export type KernelId = (typeof KERNEL_IDS)[number];
/** The Debian suite each kernel comes from; undefined: the machine's own (bookworm). */
const SUITE: Record<KernelId, string | undefined> = { '6.1': undefined, '6.12': 'trixie', sid: 'sid' };
/** What the initrd must load to mount the host's root: virtio-pci and 9p over virtio. */
const BOOT_TARGETS = ['virtio_pci', '9pnet_virtio', '9p'];

export class HarnessError extends Error {}

export interface Kernel {
  id: KernelId;
  vmlinuz: string;
  /** The directory holding `<release>/` (bound over /lib/modules inside the VM). */
  modulesDir: string;
  release: string;
}

/** `KERNELS` as a list of kernel ids: comma-separated, in the order given; default all three. */
export function parseKernels(value: string | undefined): KernelId[] {
  if (value === undefined || value.trim() === '') return [...KERNEL_IDS];
  const ids = value.split(',').map((s) => s.trim());
  for (const id of ids)
    if (!(KERNEL_IDS as readonly string[]).includes(id))
      throw new HarnessError(`KERNELS: unknown kernel ${JSON.stringify(id)} (known: ${KERNEL_IDS.join(', ')})`);
  return ids as KernelId[];
}

/** Run a command; its stdout, or a HarnessError with its stderr. */
export function sh(cmd: string, args: string[], cwd?: string): string {
  const r = spawnSync(cmd, args, { cwd, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  if (r.error) throw new HarnessError(`${cmd}: ${r.error.message}`);
  if (r.status !== 0) throw new HarnessError(`${cmd} ${args.join(' ')} failed (${r.status}): ${r.stderr}`);
  return r.stdout;
}

/** The packages of the suite's current kernel: the image, and the parts newer ones split off. */
function kernelPackages(apt: string[]): string[] {
  const depends = (pkg: string) =>
    outputText(spawnSync('apt-cache', [...apt, 'depends', pkg], { encoding: 'utf8' }).stdout);
  let out = depends('linux-image-amd64');
  if (!/Depends: linux-image-/.test(out) && apt.length === 0) {
    sh('apt-get', ['update', '-q']);
    out = depends('linux-image-amd64');
  }
  const image = /Depends: (linux-image-[0-9][^\s]*-amd64)\b/.exec(out)?.[1];
  if (!image) throw new HarnessError(`cannot tell which kernel linux-image-amd64 depends on:\n${out}`);
  const parts = [...depends(image).matchAll(/Depends: (linux-(?:binary|modules|base)-[0-9][^\s]*)/g)].map((m) => m[1]!);
  return [image, ...new Set(parts)];
}

function find(id: KernelId, root: string): Kernel | undefined {
  const modulesDir = join(root, 'lib', 'modules');
  if (!existsSync(modulesDir)) return undefined;
  const boot = existsSync(join(root, 'boot')) ? readdirSync(join(root, 'boot')) : [];
  const v = boot.find((f) => f.startsWith('vmlinuz-'));
  if (v) return { id, vmlinuz: join(root, 'boot', v), modulesDir, release: v.slice('vmlinuz-'.length) };
  const release = readdirSync(modulesDir).find((r) => existsSync(join(modulesDir, r, 'vmlinuz')));
  return release ? { id, vmlinuz: join(modulesDir, release, 'vmlinuz'), modulesDir, release } : undefined;
}

/** The kernel `id`, fetched and unpacked once under .cache/kernel/<id>. */
export function ensureKernel(cache: string, id: KernelId): Kernel {
  const dir = join(cache, id);
  const root = join(dir, 'root');
  const have = find(id, root);
  if (have && existsSync(join(have.modulesDir, have.release, 'modules.dep'))) return have;
  rmSync(root, { recursive: true, force: true });
  const suite = SUITE[id];
  const apt = suite ? privateApt(join(dir, 'apt'), suite) : [];
  const debs = join(dir, 'debs');
  rmSync(debs, { recursive: true, force: true });
  mkdirSync(debs, { recursive: true });
  const pkgs = kernelPackages(apt);
  sh('apt-get', [...apt, 'download', '-q', ...pkgs], debs);
  for (const deb of readdirSync(debs).filter((f) => f.endsWith('.deb'))) sh('dpkg', ['-x', join(debs, deb), root]);
  // Merged /usr: modules under usr/lib/modules. depmod -b and the VM's bind mount read lib/modules.
  if (!existsSync(join(root, 'lib', 'modules')) && existsSync(join(root, 'usr', 'lib', 'modules'))) {
    mkdirSync(join(root, 'lib'), { recursive: true });
    symlinkSync('../usr/lib/modules', join(root, 'lib', 'modules'));
  }
  const k = find(id, root);
  if (!k) throw new HarnessError(`no vmlinuz in ${pkgs.join(', ')}`);
  // The package's postinst would run depmod; without modules.dep nothing autoloads.
  sh('depmod', ['-b', root, k.release]);
  rmSync(debs, { recursive: true, force: true });
  return k;
}

const moduleName = (path: string) => basename(path).replace(/\.ko(\.xz|\.zst|\.gz)?$/, '');

/**
 * The modules the initrd loads, in load order (each after its dependencies): the closure of
 * BOOT_TARGETS in the kernel's modules.dep. A target the kernel builds in is not there.
 */
export function bootModules(k: Kernel): Array<{ name: string; path: string }> {
  const base = join(k.modulesDir, k.release);
  const deps = new Map<string, { path: string; deps: string[] }>();
  for (const line of readFileSync(join(base, 'modules.dep'), 'utf8').split('\n')) {
    const [path, rest] = line.split(':');
    if (!path || rest === undefined) continue;
    deps.set(moduleName(path), {
      path: join(base, path),
      deps: rest.trim().split(/\s+/).filter(Boolean).map(moduleName),
    });
  }
  const order: Array<{ name: string; path: string }> = [];
  const seen = new Set<string>();
  const visit = (name: string) => {
    const m = deps.get(name);
    if (!m || seen.has(name)) return;
    seen.add(name);
    for (const d of m.deps) visit(d);
    order.push({ name, path: m.path });
  };
  const builtin = existsSync(join(base, 'modules.builtin')) ? readFileSync(join(base, 'modules.builtin'), 'utf8') : '';
  for (const t of BOOT_TARGETS) {
    if (!deps.has(t) && !builtin.split('\n').some((l) => moduleName(l) === t))
      throw new HarnessError(`kernel ${k.release}: module ${t} is neither in modules.dep nor built in`);
    visit(t);
  }
  return order;
}

/** Copy a module into the initrd as plain `.ko` (busybox insmod reads no compressed module). */
export function copyModule(path: string, to: string): void {
  if (path.endsWith('.ko')) copyFileSync(path, to);
  else if (path.endsWith('.ko.xz')) sh('sh', ['-c', `xz -dc '${path}' > '${to}'`]);
  else if (path.endsWith('.ko.zst')) sh('sh', ['-c', `zstd -qdc '${path}' > '${to}'`]);
  else throw new HarnessError(`cannot unpack module ${path}`);
}

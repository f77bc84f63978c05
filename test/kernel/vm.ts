/**
 * Real-kernel harness: boot Debian's 6.1 kernel (which has flowtables) under qemu with the
 * host's root over 9p, and run one script inside. The host kernel has no flowtable support,
 * so this is where offload is proven.
 *
 * - The kernel package is the one `linux-image-amd64` depends on, fetched with
 *   `apt-get download` into the git-ignored `.cache/kernel` and extracted with `dpkg -x`.
 * - A tiny busybox initrd insmods virtio and 9p, mounts `/` from the host and switch_roots
 *   into `test/kernel/stage2.sh`, which mounts fresh tmpfs on /tmp and /run (iperf3 and
 *   anything else that unlinks open temp files fails on 9p), binds the extracted modules
 *   over /lib/modules, runs the script from the repository, and powers off.
 * - The repository is bind-mounted at /run/flowhint-src inside the VM before /tmp is
 *   covered, so a checkout under /tmp still works.
 */
import { spawn, spawnSync } from 'node:child_process';
import {
  chmodSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  readdirSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { outputText } from '../setup/tools.ts';

export const REPO = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const CACHE = join(REPO, '.cache', 'kernel');
/** Where the repository is seen inside the VM. */
export const VM_SRC = '/run/flowhint-src';

const BOOT_MODULES = [
  'virtio_ring',
  'virtio',
  'virtio_pci_legacy_dev',
  'virtio_pci_modern_dev',
  'virtio_pci',
  'netfs',
  'fscache',
  '9pnet',
  '9pnet_virtio',
  '9p',
];

export class HarnessError extends Error {}

function sh(cmd: string, args: string[], cwd?: string): string {
  const r = spawnSync(cmd, args, { cwd, encoding: 'utf8' });
  if (r.error) throw new HarnessError(`${cmd}: ${r.error.message}`);
  if (r.status !== 0) throw new HarnessError(`${cmd} ${args.join(' ')} failed (${r.status}): ${r.stderr}`);
  return r.stdout;
}

/** Preconditions, loudly: this suite never skips and reports success. */
export function checkHost(): void {
  if (process.getuid?.() !== 0)
    throw new HarnessError('the real-kernel suite needs root (9p passthrough, network namespaces)');
  for (const tool of ['qemu-system-x86_64', 'cpio', 'busybox', 'apt-get', 'dpkg']) {
    if (spawnSync('sh', ['-c', `command -v ${tool}`]).status !== 0) {
      throw new HarnessError(`${tool} not found; install qemu-system-x86 busybox-static cpio (bash .ci/run does)`);
    }
  }
}

function kernelPackage(): string {
  let out = outputText(spawnSync('apt-cache', ['depends', 'linux-image-amd64'], { encoding: 'utf8' }).stdout);
  if (!/Depends: linux-image-/.test(out)) {
    sh('apt-get', ['update', '-q']);
    out = sh('apt-cache', ['depends', 'linux-image-amd64']);
  }
  const m = /Depends: (linux-image-[0-9][^\s]*-amd64)\b/.exec(out);
  if (!m?.[1]) throw new HarnessError(`cannot tell which kernel linux-image-amd64 depends on:\n${out}`);
  return m[1];
}

export interface Kernel {
  vmlinuz: string;
  modulesDir: string;
  release: string;
}

export function ensureKernel(): Kernel {
  const root = join(CACHE, 'root');
  const find = (): Kernel | undefined => {
    if (!existsSync(join(root, 'boot'))) return undefined;
    const v = readdirSync(join(root, 'boot')).find((f) => f.startsWith('vmlinuz-'));
    if (!v) return undefined;
    const release = v.slice('vmlinuz-'.length);
    return { vmlinuz: join(root, 'boot', v), modulesDir: join(root, 'lib', 'modules'), release };
  };
  const have = find();
  if (have && existsSync(join(have.modulesDir, have.release, 'modules.dep'))) return have;
  mkdirSync(CACHE, { recursive: true });
  const pkg = kernelPackage();
  sh('apt-get', ['download', '-q', pkg], CACHE);
  const deb = readdirSync(CACHE).find((f) => f.startsWith(pkg) && f.endsWith('.deb'));
  if (!deb) throw new HarnessError(`apt-get download ${pkg} produced no .deb in ${CACHE}`);
  sh('dpkg', ['-x', join(CACHE, deb), root]);
  const k = find();
  if (!k) throw new HarnessError(`no vmlinuz in ${deb}`);
  // The package's postinst would run depmod; without modules.dep nothing autoloads.
  sh('depmod', ['-b', root, k.release]);
  return k;
}

const INIT = `#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
for m in ${BOOT_MODULES.join(' ')}; do insmod /mods/$m.ko || echo "initrd: insmod $m failed"; done
mkdir -p /newroot
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000,cache=loose hostroot /newroot || { echo "initrd: 9p mount failed"; echo o > /proc/sysrq-trigger; }
mount --move /dev /newroot/dev
umount /proc /sys
exec switch_root /newroot /bin/bash "$FH_SRC/test/kernel/stage2.sh"
`;

export function ensureInitrd(k: Kernel): string {
  const out = join(CACHE, `initrd-${k.release}.cpio.gz`);
  if (existsSync(out)) return out;
  const dir = join(CACHE, 'initrd');
  rmSync(dir, { recursive: true, force: true });
  for (const d of ['bin', 'proc', 'sys', 'dev', 'mods', 'newroot']) mkdirSync(join(dir, d), { recursive: true });
  copyFileSync('/bin/busybox', join(dir, 'bin', 'busybox'));
  chmodSync(join(dir, 'bin', 'busybox'), 0o755);
  symlinkSync('busybox', join(dir, 'bin', 'sh'));
  const modRoot = join(k.modulesDir, k.release, 'kernel');
  for (const m of BOOT_MODULES) {
    const path = sh('find', [modRoot, '-name', `${m}.ko`])
      .trim()
      .split('\n')[0];
    if (!path) throw new HarnessError(`module ${m}.ko not found under ${modRoot}`);
    copyFileSync(path, join(dir, 'mods', `${m}.ko`));
  }
  writeFileSync(join(dir, 'init'), INIT, { mode: 0o755 });
  sh('sh', [
    '-c',
    `cd '${dir}' && find . | cpio -o -H newc --quiet | gzip -1 > '${out}.tmp' && mv '${out}.tmp' '${out}'`,
  ]);
  return out;
}

export interface VmResult {
  code: number;
  output: string;
  timedOut: boolean;
}

/**
 * Boot, run `script` (a path relative to the repository, executed with bash inside), and
 * return its exit status and console output. `onOutput` streams the console.
 */
export async function runInVm(
  script: string,
  o: {
    timeoutMs?: number;
    memoryMiB?: number;
    onOutput?: (s: string) => void;
    env?: Record<string, string>;
    icount?: boolean;
  } = {},
): Promise<VmResult> {
  checkHost();
  const k = ensureKernel();
  const initrd = ensureInitrd(k);
  // The VM binds the extracted modules over /lib/modules, which needs the mount point. Some
  // machines (containers) have none; an empty one is what Debian ships anyway.
  mkdirSync('/lib/modules', { recursive: true });
  const env = Object.entries(o.env ?? {}).map(([key, v]) => {
    if (!/^[A-Z_][A-Z0-9_]*$/.test(key) || !/^[A-Za-z0-9_.,:/=-]*$/.test(v))
      throw new HarnessError(`env ${key}=${v} cannot go on a kernel command line`);
    return `${key}=${v}`;
  });
  if (/\s/.test(REPO))
    throw new HarnessError(`the repository path ${REPO} has white space; the kernel command line cannot carry it`);
  const append = [
    'console=ttyS0',
    'quiet',
    'loglevel=3',
    'panic=-1',
    'rdinit=/init',
    `FH_SRC=${REPO}`,
    `FH_VM_SRC=${VM_SRC}`,
    `FH_MODULES=${k.modulesDir}`,
    `FH_SCRIPT=${script}`,
    ...env,
  ].join(' ');
  // icount: one vCPU, single-threaded TCG, guest time = executed instructions (1 ns each) and
  // never waiting on the host (sleep=off), so a throughput inside the guest is work per
  // instruction, the same on a busy host as on an idle one.
  const cpu = o.icount
    ? ['-accel', 'tcg', '-icount', 'shift=0,sleep=off', '-smp', '1']
    : ['-accel', 'tcg,thread=multi', '-smp', '2'];
  const args = [
    '-machine',
    'q35',
    ...cpu,
    // No PKU in the guest: with it, V8 (Node 24) write-protects JIT pages with protection
    // keys, and under TCG its page bookkeeping failed once in CI ("Check failed:
    // it->second.Size() > offset", ThreadIsolation), crashing an `agent --once`. Nothing
    // flowhint tests depends on PKU.
    '-cpu',
    'max,pku=off',
    '-m',
    String(o.memoryMiB ?? 2048),
    '-nographic',
    '-no-reboot',
    '-nic',
    'none',
    '-kernel',
    k.vmlinuz,
    '-initrd',
    initrd,
    '-append',
    append,
    '-virtfs',
    'local,path=/,mount_tag=hostroot,security_model=passthrough,multidevs=remap',
  ];
  return new Promise((resolveRun) => {
    const child = spawn('qemu-system-x86_64', args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    let timedOut = false;
    const onData = (c: Buffer) => {
      const s = c.toString();
      output += s;
      o.onOutput?.(s);
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    const timer = setTimeout(
      () => {
        timedOut = true;
        child.kill('SIGKILL');
      },
      o.timeoutMs ?? 20 * 60_000,
    );
    child.on('close', () => {
      clearTimeout(timer);
      const m = /FLOWHINT_EXIT=(\d+)/.exec(output);
      resolveRun({ code: m?.[1] ? Number(m[1]) : timedOut ? 124 : 125, output, timedOut });
    });
  });
}

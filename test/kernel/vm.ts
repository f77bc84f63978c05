/**
 * Real-kernel harness: boot a Debian kernel (which has flowtables) under qemu with the
 * host's root over 9p, and run one script inside. The host kernel has no flowtable support,
 * so this is where offload is proven.
 *
 * - Which kernels and how they are fetched: kernels.ts (bookworm's 6.1 unless told).
 * - A tiny busybox initrd insmods virtio and 9p, mounts `/` from the host and switch_roots
 *   into `test/kernel/stage2.sh`, which mounts fresh tmpfs on /tmp and /run (iperf3 and
 *   anything else that unlinks open temp files fails on 9p), binds the extracted modules
 *   over /lib/modules, runs the script from the repository, and powers off.
 * - The repository is bind-mounted at /run/flowhint-src inside the VM before /tmp is
 *   covered, so a checkout under /tmp still works.
 */
import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, copyFileSync, existsSync, mkdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { bootModules, copyModule, ensureKernel, HarnessError, sh, type Kernel, type KernelId } from './kernels.ts';

export { HarnessError } from './kernels.ts';

export const REPO = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const CACHE = join(REPO, '.cache', 'kernel');
/** Where the repository is seen inside the VM. */
export const VM_SRC = '/run/flowhint-src';

/** Preconditions, loudly: this suite never skips and reports success. */
export function checkHost(): void {
  if (process.getuid?.() !== 0)
    throw new HarnessError('the real-kernel suite needs root (9p passthrough, network namespaces)');
  for (const tool of ['qemu-system-x86_64', 'cpio', 'busybox', 'apt-get', 'dpkg', 'xz']) {
    if (spawnSync('sh', ['-c', `command -v ${tool}`]).status !== 0) {
      throw new HarnessError(`${tool} not found; install qemu-system-x86 busybox-static cpio (bash .ci/run does)`);
    }
  }
}

const init = (modules: readonly string[]) => `#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
for m in ${modules.join(' ')}; do insmod /mods/$m.ko || echo "initrd: insmod $m failed"; done
mkdir -p /newroot
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000,cache=loose hostroot /newroot || { echo "initrd: 9p mount failed"; echo o > /proc/sysrq-trigger; }
mount --move /dev /newroot/dev
umount /proc /sys
exec switch_root /newroot /bin/bash "$FH_SRC/test/kernel/stage2.sh"
`;

export function ensureInitrd(k: Kernel): string {
  const out = join(CACHE, k.id, `initrd-${k.release}.cpio.gz`);
  if (existsSync(out)) return out;
  const dir = join(CACHE, k.id, 'initrd');
  rmSync(dir, { recursive: true, force: true });
  for (const d of ['bin', 'proc', 'sys', 'dev', 'mods', 'newroot']) mkdirSync(join(dir, d), { recursive: true });
  copyFileSync('/bin/busybox', join(dir, 'bin', 'busybox'));
  chmodSync(join(dir, 'bin', 'busybox'), 0o755);
  symlinkSync('busybox', join(dir, 'bin', 'sh'));
  const modules = bootModules(k);
  for (const m of modules) copyModule(m.path, join(dir, 'mods', `${m.name}.ko`));
  writeFileSync(join(dir, 'init'), init(modules.map((m) => m.name)), { mode: 0o755 });
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
    /** Which kernel (kernels.ts); bookworm's 6.1 if absent. */
    kernel?: KernelId;
  } = {},
): Promise<VmResult> {
  checkHost();
  const k = ensureKernel(CACHE, o.kernel ?? '6.1');
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

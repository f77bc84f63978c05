/**
 * test/kernel/kernels.ts's pure parts (the harness itself runs in `npm run test:kernel`):
 * which kernels `KERNELS` names, and which modules the initrd loads, in which order, from a
 * modules.dep written here the way sid's 7.2 and bookworm's 6.1 lay theirs out.
 */
import t from 'tap';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { bootModules, parseKernels } from '../kernel/kernels.ts';

t.test('KERNELS: a comma-separated list, default all three, unknown names refused', async (t) => {
  t.same(parseKernels(undefined), ['6.1', '6.12', 'sid']);
  t.same(parseKernels(''), ['6.1', '6.12', 'sid']);
  t.same(parseKernels('sid, 6.12'), ['sid', '6.12']);
  t.throws(() => parseKernels('6.1,7.0'), /unknown kernel "7.0" \(known: 6.1, 6.12, sid\)/);
});

/** A kernel whose modules.dep has `dep` (one line each) and whose modules.builtin has `builtin`. */
function kernel(
  dep: string[],
  builtin: string[] = [],
): { modulesDir: string; release: string; id: '6.1'; vmlinuz: string } {
  const modulesDir = mkdtempSync(join(tmpdir(), 'fh-kernels-'));
  mkdirSync(join(modulesDir, 'r1'));
  writeFileSync(join(modulesDir, 'r1', 'modules.dep'), dep.map((l) => `${l}\n`).join(''));
  writeFileSync(join(modulesDir, 'r1', 'modules.builtin'), builtin.map((l) => `${l}\n`).join(''));
  return { id: '6.1', modulesDir, release: 'r1', vmlinuz: '' };
}

t.test("the initrd's modules: 9p's and virtio-pci's closure, each after its dependencies", async (t) => {
  // bookworm 6.1's shape: everything a module, uncompressed.
  const k = kernel([
    'kernel/drivers/virtio/virtio_pci.ko: kernel/drivers/virtio/virtio_pci_legacy_dev.ko kernel/drivers/virtio/virtio_pci_modern_dev.ko kernel/drivers/virtio/virtio.ko kernel/drivers/virtio/virtio_ring.ko',
    'kernel/drivers/virtio/virtio_pci_legacy_dev.ko:',
    'kernel/drivers/virtio/virtio_pci_modern_dev.ko:',
    'kernel/drivers/virtio/virtio.ko: kernel/drivers/virtio/virtio_ring.ko',
    'kernel/drivers/virtio/virtio_ring.ko:',
    'kernel/net/9p/9pnet_virtio.ko: kernel/drivers/virtio/virtio.ko kernel/drivers/virtio/virtio_ring.ko kernel/net/9p/9pnet.ko',
    'kernel/net/9p/9pnet.ko:',
    'kernel/fs/9p/9p.ko: kernel/fs/netfs/netfs.ko kernel/fs/fscache/fscache.ko kernel/net/9p/9pnet.ko',
    'kernel/fs/fscache/fscache.ko: kernel/fs/netfs/netfs.ko',
    'kernel/fs/netfs/netfs.ko:',
    'kernel/net/netfilter/nf_flow_table.ko:',
  ]);
  const names = bootModules(k).map((m) => m.name);
  t.same(names, [
    'virtio_pci_legacy_dev',
    'virtio_pci_modern_dev',
    'virtio_ring',
    'virtio',
    'virtio_pci',
    '9pnet',
    '9pnet_virtio',
    'netfs',
    'fscache',
    '9p',
  ]);
  t.equal(bootModules(k)[0]?.path, join(k.modulesDir, 'r1', 'kernel/drivers/virtio/virtio_pci_legacy_dev.ko'));
});

t.test('sid: virtio built in, modules .ko.xz', async (t) => {
  const k = kernel(
    [
      'kernel/net/9p/9pnet_virtio.ko.xz: kernel/net/9p/9pnet.ko.xz',
      'kernel/net/9p/9pnet.ko.xz:',
      'kernel/fs/9p/9p.ko.xz: kernel/fs/netfs/netfs.ko.xz kernel/net/9p/9pnet.ko.xz',
      'kernel/fs/netfs/netfs.ko.xz:',
    ],
    ['kernel/drivers/virtio/virtio.ko', 'kernel/drivers/virtio/virtio_pci.ko'],
  );
  t.same(
    bootModules(k).map((m) => m.name),
    ['9pnet', '9pnet_virtio', 'netfs', '9p'],
  );
  t.match(bootModules(k)[0]?.path, /9pnet\.ko\.xz$/);
});

t.test('a driver neither a module nor built in: a harness error naming it', async (t) => {
  const k = kernel(['kernel/fs/9p/9p.ko:']);
  t.throws(() => bootModules(k), /module virtio_pci is neither in modules.dep nor built in/);
});

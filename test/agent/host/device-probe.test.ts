/**
 * The live device probe (agent/host/device-probe.ts): the FAKE nft with and without in-place
 * device changes, and the exact nft text it commits (written out here, as nft 1.0.6 takes it;
 * the VM suite runs it on a real kernel).
 */
import t from 'tap';
import { FakeNft } from '../../helpers/fake-nft.ts';
import { DEVICE_PROBE_TABLE, probeDeviceUpdate } from '../../../agent/host/device-probe.ts';
import { makeNft } from '../../../agent/nft/nft.ts';
import type { Runner } from '../../../lib/exec.ts';

t.test("a kernel that changes a live flowtable's devices: supported, nothing left behind", async (t) => {
  const nft = new FakeNft(['eth0']);
  t.same(await probeDeviceUpdate(nft), { supported: true, reason: '' });
  t.equal(nft.others.size, 0);
  t.equal(nft.transactions.length, 0, 'our own table is never touched');
  t.equal(nft.table, undefined);
});

t.test('before Linux 5.8 (an add changes nothing): unsupported, with the reason', async (t) => {
  const nft = new FakeNft(['eth0']);
  nft.deviceUpdateSupported = false;
  const r = await probeDeviceUpdate(nft);
  t.same(r, { supported: false, reason: 'adding device lo to a live flowtable left it out' });
  t.equal(nft.others.size, 0, 'the throwaway table is deleted after a failed step too');
});

t.test('a leftover table of an interrupted probe does not fail it', async (t) => {
  const nft = new FakeNft(['eth0']);
  await nft.apply([{ verb: 'add', obj: { type: 'table' } }], DEVICE_PROBE_TABLE);
  t.equal(nft.others.size, 1);
  t.same(await probeDeviceUpdate(nft), { supported: true, reason: '' });
  t.equal(nft.others.size, 0);
});

function listing(devices: string[]): string {
  const flowtable = {
    family: 'inet',
    name: 'p',
    table: DEVICE_PROBE_TABLE,
    hook: 'ingress',
    prio: 0,
    ...(devices.length ? { dev: devices.length === 1 ? devices[0] : devices } : {}),
  };
  return JSON.stringify({ nftables: [{ table: { family: 'inet', name: DEVICE_PROBE_TABLE } }, { flowtable }] });
}

t.test('the commands, as nft takes them; a removal that deletes the flowtable is unsupported', async (t) => {
  const texts: string[] = [];
  let devices: string[] = [];
  let gone = false;
  const run: Runner = async (argv, o) => {
    if (argv.join(' ') === `nft -j list table inet ${DEVICE_PROBE_TABLE}`)
      return gone
        ? { code: 1, stdout: '', stderr: 'Error: No such file or directory\n' }
        : { code: 0, stdout: listing(devices), stderr: '' };
    texts.push(o?.stdin ?? '');
    if (texts.length === 2) devices = ['lo'];
    if (texts.length === 3) gone = true; // as Linux before 5.8 does
    return { code: 0, stdout: '', stderr: '' };
  };
  const r = await probeDeviceUpdate(makeNft(run));
  t.same(r, { supported: false, reason: 'removing device lo deleted the whole flowtable' });
  const T = `inet ${DEVICE_PROBE_TABLE}`;
  t.same(texts, [
    `add table ${T}\ndelete table ${T}\nadd table ${T}\nadd flowtable ${T} p { hook ingress priority filter; }\n`,
    `add flowtable ${T} p { hook ingress priority filter; devices = { "lo" }; }\n`,
    `delete flowtable ${T} p { devices = { "lo" }; }\n`,
    `delete table ${T}\n`,
  ]);
});

t.test("nft refusing a step: unsupported with nft's own words", async (t) => {
  let n = 0;
  const run: Runner = async () => {
    n += 1;
    return n === 1
      ? { code: 1, stdout: '', stderr: 'Error: Could not process rule: No such file or directory\n' }
      : { code: 0, stdout: '', stderr: '' };
  };
  const r = await probeDeviceUpdate(makeNft(run));
  t.same(r, { supported: false, reason: 'Error: Could not process rule: No such file or directory' });
  t.equal(n, 2, 'and the throwaway table is still deleted');
});

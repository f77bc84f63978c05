/**
 * A FAKE nft, in memory, for agent tests without root (after knftables' Fake): it applies
 * transactions to a table model with nft's semantics (agent/nft/table-model.ts: all or nothing,
 * missing objects and devices fail, references are checked) and can be told to fail the
 * next transactions. Reads return the model itself, which is what nft.ts makes of a real
 * listing, so the agent cannot tell them apart. The netns and VM suites test the
 * real nft.
 *
 * With it, a fake Runner for the host commands the agent runs (ip link and addr, sysctl,
 * conntrack, ipvsadm, nft list flowtables): devices can vanish and appear.
 */
import { NftError, classifyNft, type CheckResult, type Nft } from '../../agent/nft/nft.ts';
import { applyTransaction, type TableModel } from '../../agent/nft/table-model.ts';
import { familyOfName } from '../../agent/nft/names.ts';
import { TABLE, toText, type Transaction } from '../../agent/nft/transaction.ts';
import type { ExecResult, Runner } from '../../lib/exec.ts';

export class FakeNft implements Nft {
  table: TableModel | undefined;
  /** Every transaction offered to apply(), failed or not, in order. */
  readonly transactions: Transaction[] = [];
  /** Devices that exist (shared with the fake host). */
  readonly devices: Set<string>;
  flowtableSupported = true;
  /** false: the kernel is older than 5.8 (asKernel). */
  deviceUpdateSupported = true;
  /** Tables other than ours (the device probe's throwaway table). */
  readonly others = new Map<string, TableModel>();
  ctTimeoutSupported = true;
  private failures = 0;
  /** Called before each transaction is applied (to change the host under the agent). */
  beforeApply: ((tx: Transaction) => void) | undefined;
  /** Every host command fakeHost was asked to run, in order. */
  readonly ran: string[] = [];

  constructor(devices: Iterable<string> = ['eth0']) {
    this.devices = new Set(devices);
  }

  /** A device disappears: the kernel drops it from every flowtable by itself. */
  removeDevice(name: string): void {
    this.devices.delete(name);
    if (!this.table) return;
    const flowtables = new Map(
      [...this.table.flowtables].map(([k, f]) => [
        k,
        { ...f, devices: new Set([...f.devices].filter((d) => d !== name)) },
      ]),
    );
    this.table = { ...this.table, flowtables };
  }

  /** Fail the next n transactions, as nft would (nothing applied). */
  failNext(n: number): void {
    this.failures = n;
  }

  async apply(tx: Transaction, table?: string): Promise<void> {
    if (tx.length === 0) return;
    if (table !== undefined && table !== TABLE) return this.applyOther(tx, table);
    this.transactions.push(tx);
    this.beforeApply?.(tx);
    if (this.failures > 0) {
      this.failures -= 1;
      throw new NftError('other', 'nft transaction failed: Error: injected failure', 'Error: injected failure\n');
    }
    try {
      this.table = applyTransaction(this.table, this.asKernel(this.table, tx), { devices: this.devices });
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      throw new NftError(classifyNft(1, message), `nft transaction failed: ${message}`, `${message}\n${toText(tx)}`);
    }
  }

  async check(transaction: Transaction): Promise<CheckResult> {
    const stderr = 'Error: Could not process rule: No such file or directory\n';
    const has = (type: string) => transaction.some((op) => op.verb === 'add' && op.obj.type === type);
    if (has('flowtable') && !this.flowtableSupported) return { ok: false, failure: 'not-found', stderr };
    if (has('ct timeout') && !this.ctTimeoutSupported) return { ok: false, failure: 'not-found', stderr };
    return { ok: true };
  }

  async read(table?: string) {
    return table !== undefined && table !== TABLE ? this.others.get(table) : this.table;
  }

  /** The `inet` table's objects only, as one `nft list table inet flowhint` shows them. */
  async readInet(): Promise<TableModel | undefined> {
    const t = this.table;
    if (!t?.tables.has('inet')) return undefined;
    const inet = <V>(m: ReadonlyMap<string, V>) => new Map([...m].filter(([name]) => familyOfName(name) === 'inet'));
    return {
      ...t,
      tables: new Set(['inet']),
      flowtables: inet(t.flowtables),
      chains: inet(t.chains),
      maps: inet(t.maps),
      sets: inet(t.sets),
      ctTimeouts: inet(t.ctTimeouts),
    };
  }

  /** Another table (the device probe's): the same semantics, not recorded in `transactions`. */
  private async applyOther(tx: Transaction, table: string): Promise<void> {
    try {
      const now = applyTransaction(this.others.get(table), this.asKernel(this.others.get(table), tx), {
        devices: new Set([...this.devices, 'lo']),
      });
      if (now) this.others.set(table, now);
      else this.others.delete(table);
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      throw new NftError(classifyNft(1, message), `nft transaction failed: ${message}`, message);
    }
  }

  /**
   * The transaction as this kernel runs it: before Linux 5.8 (`deviceUpdateSupported` false),
   * `add flowtable` on an existing flowtable changes nothing, and deleting devices deletes
   * the whole flowtable.
   */
  private asKernel(before: TableModel | undefined, tx: Transaction): Transaction {
    if (this.deviceUpdateSupported) return tx;
    const exists = new Set(before?.flowtables.keys() ?? []);
    return tx.flatMap((op): Transaction => {
      if (op.obj.type === 'table' && op.verb === 'delete') exists.clear();
      if (op.obj.type !== 'flowtable') return [op];
      const name = op.obj.name;
      if (op.verb === 'add' && exists.has(name)) return [];
      if (op.verb === 'add') exists.add(name);
      if (op.verb === 'delete') exists.delete(name);
      return op.verb === 'delete' ? [{ ...op, obj: { type: 'flowtable', name } }] : [op];
    });
  }

  async listText(): Promise<string | undefined> {
    return this.table ? JSON.stringify([...this.table.chains]) : undefined;
  }
}

const ok = (stdout: string): ExecResult => ({ code: 0, stdout, stderr: '' });

/** The host commands the agent runs, answered from the fake's devices; the node has one address. */
export function fakeHost(nft: FakeNft, nodeAddress = '192.0.2.10'): Runner {
  return async (argv) => {
    const cmd = argv.join(' ');
    nft.ran.push(cmd);
    if (cmd.startsWith('ip -j link'))
      return ok(
        JSON.stringify([
          { ifname: 'lo', flags: ['LOOPBACK', 'UP'], link_type: 'loopback' },
          ...[...nft.devices].map((ifname) => ({
            ifname,
            flags: ['UP', 'LOWER_UP'],
            operstate: 'UP',
            link_type: 'ether',
          })),
        ]),
      );
    if (cmd.startsWith('ip -j') && cmd.includes('addr'))
      return ok(
        JSON.stringify([
          { ifname: 'eth0', flags: ['UP'], addr_info: [{ family: 'inet', local: nodeAddress, scope: 'global' }] },
        ]),
      );
    if (cmd.startsWith('sysctl -n')) return ok('1\n');
    // As conntrack 1.4.7 answers an update that matched nothing (an empty table).
    if (cmd.startsWith('conntrack -U'))
      return { code: 1, stdout: '', stderr: 'conntrack v1.4.7 (conntrack-tools): 0 flow entries have been updated.\n' };
    if (argv[0] === 'nft' && cmd.includes('list flowtables')) return ok(JSON.stringify({ nftables: [] }));
    return { code: 127, stdout: '', stderr: `${argv[0]}: not in the fake host\n` };
  };
}

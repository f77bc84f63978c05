/**
 * The node's conntrack timeouts (`net.netfilter.nf_conntrack_*_timeout*`), which every
 * ShortLived policy starts from (state/timeout-policy.ts). Read with one `sysctl` in the
 * node's network namespace (sysctls under net/ are per namespace); read-only, so it works
 * with the read-only `/proc/sys` container runtimes mount.
 */
import type { Runner } from '../../lib/exec.ts';
import { parseNodeTimeouts, timeoutSysctls, type NodeTimeouts } from '../state/timeout-policy.ts';

export interface NodeTimeoutsRead {
  readonly timeouts: NodeTimeouts;
  /** Empty when every sysctl was read; else which were not, and why. */
  readonly problem: string;
}

export async function readNodeTimeouts(run: Runner): Promise<NodeTimeoutsRead> {
  // `sysctl` prints what it can and names what it cannot: one missing key fails no other.
  const r = await run(['sysctl', ...timeoutSysctls()]);
  const { timeouts, missing } = parseNodeTimeouts(r.stdout);
  const why = r.stderr.trim().split('\n')[0] ?? '';
  const problem =
    missing.length === 0
      ? ''
      : `cannot read ${missing.join(', ')}${why ? ` (${why})` : ''}: the kernel's defaults stand in for them`;
  return { timeouts, problem };
}

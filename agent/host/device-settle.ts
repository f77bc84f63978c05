/**
 * Devices join the flowtable once they have stayed up for a while (pure: time is passed in).
 *
 * A node with short-lived pods (Jobs, CI runners) creates and deletes veths faster than the
 * agent can act on them: a veth seen by one host poll is often gone by the transaction that
 * adds it, and that transaction fails. Measured in the VM (test/kernel/churn.sh, a veth pair
 * every 100 ms): every device sync failed, took 3.5 to 6 s of nft work, and the next poll
 * started another, so hint changes waited behind them. A device that has not been listed for
 * `settleMs` yet is left out of the flowtable until a later poll; one that lived less than
 * that never reaches nft. Pods that live longer join a poll or two later, and their flows
 * are offloaded from then on (conntrack keeps the mark; the next packet past the threshold
 * offloads them).
 *
 * The first listing counts as settled: the devices a node has when the agent starts are
 * not churn. A device missing from a listing is forgotten, so one that comes back waits again.
 */

/** How long a device must have been listed before it joins the flowtable: half a poll interval. */
export const DEFAULT_SETTLE_MS = 1_000;

export class DeviceSettle {
  private readonly settleMs: number;
  /** Device -> when it was first listed (-Infinity: at the first listing); undefined before it. */
  private seen: Map<string, number> | undefined;

  constructor(settleMs: number = DEFAULT_SETTLE_MS) {
    this.settleMs = settleMs;
  }

  /** The devices of `listed`, in its order, that have been listed for `settleMs` at `now`. */
  settled(listed: readonly string[], now: number): string[] {
    const before = this.seen;
    const seen = new Map<string, number>();
    for (const d of listed) seen.set(d, before === undefined ? -Infinity : (before.get(d) ?? now));
    this.seen = seen;
    return listed.filter((d) => now - (seen.get(d) ?? now) >= this.settleMs);
  }

  /** Listed but not settled yet at the last listing (for the logs and tests). */
  waiting(now: number): string[] {
    return [...(this.seen ?? [])].filter(([, at]) => now - at < this.settleMs).map(([d]) => d);
  }
}

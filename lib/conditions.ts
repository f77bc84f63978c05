/**
 * Conditions worth one log line when they change, not one per check: "the kernel has no
 * flowtables", "conntrack accounting is off", "these devices cannot be rendered". Keyed by
 * condition, so it never grows with churn, and a condition that clears and comes back is
 * reported again.
 */
export class Conditions {
  private readonly states = new Map<string, string>();

  /** Record `name`'s state now; whether it differs from the one last recorded. */
  changed(name: string, state: string): boolean {
    if (this.states.get(name) === state) return false;
    this.states.set(name, state);
    return true;
  }
}

/**
 * The Services refused now: a hint the api/ reader could not use, or a manifest the file
 * source refused. Each is reported (one log line, one count) when its refusal is news: the
 * first time, when the refusal changes, or when it comes back after the Service was fixed or
 * deleted. Holds only the Services refused now, so it does not grow with churn. Pure; the
 * agent does the reporting.
 */
export interface Refusal {
  readonly code: string;
  readonly reason: string;
  /** Where it was found, for the log (a manifest file and document); not part of the refusal. */
  readonly where?: string | undefined;
}

export class Refusals {
  private readonly now = new Map<string, Refusal>();

  /** `key` is refused for `refusal`; whether that is news to report. */
  refuse(key: string, refusal: Refusal): boolean {
    const was = this.now.get(key);
    this.now.set(key, { code: refusal.code, reason: refusal.reason });
    return was?.code !== refusal.code || was.reason !== refusal.reason;
  }

  /** `key` is usable, unhinted or gone: forget its refusal. */
  clear(key: string): void {
    this.now.delete(key);
  }

  /** Every refusal now, by Service key. */
  list(): Array<{ service: string; code: string; reason: string }> {
    return [...this.now]
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([service, r]) => ({ service, code: r.code, reason: r.reason }));
  }
}

/**
 * The API server away for minutes while accepting connections and never answering (an
 * overloaded API server, or a cut that sends no reset), against the whole agent in a scratch
 * netns and the list/watch FAKE. Nothing errors here: client-node's watch gives up after
 * 30 s of silence and re-watches, and lists have a 30 s deadline. The programmed ruleset
 * must stay as it was, and converge once the API server answers again.
 * FLOWHINT_OUTAGE_SECONDS shortens it for local runs (40 at least: watches time out after
 * 30 s); CI runs the default.
 */
import t from 'tap';
import { runOutage } from '../helpers/kube-agent.ts';

const SECONDS = Number(process.env.FLOWHINT_OUTAGE_SECONDS ?? 120);

t.test(
  `the API server accepting and never answering for ${SECONDS} s: ruleset unchanged throughout, converges after`,
  async (t) => {
    t.setTimeout((SECONDS + 180) * 1000);
    const r = await runOutage(t, 'unresponsive', SECONDS);
    t.equal(r.differing, 0, `the table was byte-identical in all ${r.samples} samples`);
    t.ok(r.resyncsDuring >= 1, `${r.resyncsDuring} periodic full resyncs ran during the outage and changed nothing`);
    t.ok(
      r.watchRequestsDuring >= Math.max(1, Math.floor(SECONDS / 30) - 1),
      `${r.watchRequestsDuring} watches opened and abandoned while it did not answer (30 s each)`,
    );
    t.comment(
      `recovery: converged ${(r.recoveryMs / 1000).toFixed(1)} s after the API server answered again (worst case: a 30 s watch or list deadline, then the backoff)`,
    );
  },
);

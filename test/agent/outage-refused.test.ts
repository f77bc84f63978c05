/**
 * The API server away for minutes, refusing connections (as while it restarts), against the
 * whole agent in a scratch netns and the list/watch FAKE. The programmed ruleset must stay
 * byte for byte as it was throughout, periodic resyncs included, and converge on what
 * changed meanwhile soon after the API server is back. FLOWHINT_OUTAGE_SECONDS shortens it
 * for local runs (40 at least: watches time out after 30 s); CI runs the default.
 */
import t from 'tap';
import { runOutage } from '../helpers/kube-agent.ts';

const SECONDS = Number(process.env.FLOWHINT_OUTAGE_SECONDS ?? 150);

t.test(
  `the API server refusing connections for ${SECONDS} s: ruleset unchanged throughout, converges after`,
  async (t) => {
    t.setTimeout((SECONDS + 180) * 1000);
    const r = await runOutage(t, 'refused', SECONDS);
    t.equal(r.differing, 0, `the table was byte-identical in all ${r.samples} samples`);
    t.ok(r.resyncsDuring >= 1, `${r.resyncsDuring} periodic full resyncs ran during the outage and changed nothing`);
    // Backoff 1, 2, 4, 8, then 10 s (±20 %): about SECONDS / 10 + 4 restarts, not one a second.
    t.ok(
      r.restartsDuring >= 2 && r.restartsDuring <= SECONDS / 8 + 5,
      `${r.restartsDuring} informer restarts during the outage`,
    );
    t.comment(
      `recovery: converged ${(r.recoveryMs / 1000).toFixed(1)} s after the API server came back (restart backoff cap 10 s +20 %)`,
    );
  },
);

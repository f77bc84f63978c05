/** `--netns NAME`: the named network namespace must exist before anything runs in it. */
import { FlowhintError } from '../../lib/errors.ts';
import { makeRunner } from '../../lib/exec.ts';

/** The named network namespace exists (`ip netns` lists it), or FH_NETNS_MISSING. */
export async function requireNetns(name: string): Promise<void> {
  const r = await makeRunner([])(['ip', 'netns', 'exec', name, 'true']);
  if (r.code !== 0) {
    throw new FlowhintError(
      'FH_NETNS_MISSING',
      `network namespace ${JSON.stringify(name)} does not exist (ip netns list): ${r.stderr.trim()}`,
    );
  }
}

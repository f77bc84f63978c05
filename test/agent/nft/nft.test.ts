/**
 * The nft runner against a scripted Runner: what it sends nft, and how it reads nft's
 * failures (nft 1.0.6's own words). test/agent/netns.test.ts runs it against real nft.
 */
import t from 'tap';
import { classifyNft, makeNft, NftError, parseListing } from '../../../agent/nft/nft.ts';
import { probeCtTimeout, probeFlowtable } from '../../../agent/host/probe.ts';
import { add } from '../../../agent/nft/transaction.ts';
import type { ExecResult, Runner } from '../../../lib/exec.ts';

function scripted(answer: (argv: readonly string[], stdin: string) => Partial<ExecResult>) {
  const calls: Array<{ argv: readonly string[]; stdin: string }> = [];
  const run: Runner = async (argv, opts) => {
    const stdin = opts?.stdin ?? '';
    calls.push({ argv, stdin });
    return { code: 0, stdout: '', stderr: '', ...answer(argv, stdin) };
  };
  return { run, calls };
}

t.test('nft failures classified once, from nft 1.0.6 messages', async (t) => {
  t.equal(
    classifyNft(1, 'Error: Could not process rule: No such file or directory\nadd rule inet flowhint x\n'),
    'not-found',
  );
  t.equal(
    classifyNft(1, 'Error: No such file or directory; did you mean table ‘flowhint’ in family inet?\n'),
    'not-found',
  );
  t.equal(classifyNft(1, 'Error: Could not process rule: File exists\n'), 'exists');
  t.equal(classifyNft(1, 'Error: Could not process rule: Device or resource busy\n'), 'busy');
  t.equal(classifyNft(1, 'Error: syntax error, unexpected newline\n'), 'other');
  t.equal(classifyNft(127, 'spawn nft ENOENT'), 'missing-binary', 'exit 127: no binary, whatever it says');
});

t.test('read: a missing table is undefined; any other failure throws with its class', async (t) => {
  const missing = makeNft(scripted(() => ({ code: 1, stderr: 'Error: No such file or directory\n' })).run);
  t.equal(await missing.read(), undefined);
  const busy = makeNft(
    scripted(() => ({ code: 1, stderr: 'Error: Could not process rule: Device or resource busy\n' })).run,
  );
  const err = await busy.read().catch((e: unknown) => e);
  t.ok(err instanceof NftError);
  t.match(err, { failure: 'busy', code: 'FH_NFT_FAILED' });
  t.equal(
    (err as Error).message,
    'cannot list table inet flowhint: Error: Could not process rule: Device or resource busy',
    'the table named, nft words trimmed',
  );
  const none = makeNft(scripted(() => ({ code: 127, stderr: '' })).run);
  t.match(await none.apply([add({ type: 'table' })]).catch((e: unknown) => e), {
    failure: 'missing-binary',
    code: 'FH_NFT_MISSING',
  });
});

t.test('read lists the three tables, readInet the inet one only; a probe table is inet', async (t) => {
  const listed = (argv: readonly string[]) => argv.slice(3).join(' ');
  const s = scripted((argv) => ({
    stdout: JSON.stringify({ nftables: [{ table: { family: argv[4], name: argv[5], handle: 1 } }] }),
  }));
  const nft = makeNft(s.run);
  t.same([...((await nft.read())?.tables ?? [])], ['inet', 'ip', 'ip6']);
  t.same(
    s.calls.map((c) => listed(c.argv)),
    ['table inet flowhint', 'table ip flowhint', 'table ip6 flowhint'],
  );
  s.calls.length = 0;
  t.same([...((await nft.readInet())?.tables ?? [])], ['inet']);
  t.same(
    s.calls.map((c) => listed(c.argv)),
    ['table inet flowhint'],
    'one nft run',
  );
  s.calls.length = 0;
  await nft.read('flowhint_probe_devices');
  t.same(
    s.calls.map((c) => listed(c.argv)),
    ['table inet flowhint_probe_devices'],
  );
});

t.test("apply: nothing to do runs nothing; a failure says nft's first words, or its exit code", async (t) => {
  const s = scripted((argv, stdin) =>
    stdin.includes('quiet') ? { code: 2, stderr: '' } : { code: 1, stderr: '\n  \nError: first\nsecond\n' },
  );
  const nft = makeNft(s.run);
  await nft.apply([]);
  t.equal(s.calls.length, 0, 'an empty transaction never starts nft');
  t.match(await nft.apply([add({ type: 'chain', name: 'loud' })]).catch((e: unknown) => e), {
    message: 'nft transaction failed: Error: first',
  });
  t.match(await nft.apply([add({ type: 'chain', name: 'quiet' })]).catch((e: unknown) => e), {
    message: 'nft transaction failed: exit 2',
  });
});

t.test('check takes a transaction and validates it with nft -c, on the table it names', async (t) => {
  const s = scripted(() => ({ code: 1, stderr: 'Error: Could not process rule: File exists\n' }));
  const r = await makeNft(s.run).check([add({ type: 'table' }), add({ type: 'chain', name: 'c' })], 'scratch');
  t.same(s.calls[0]?.argv, ['nft', '-c', '-f', '-']);
  t.equal(s.calls[0]?.stdin, 'add table inet scratch\nadd chain inet scratch c\n');
  t.same(r, { ok: false, failure: 'exists', stderr: 'Error: Could not process rule: File exists\n' });
});

t.test('the kernel probes: a throwaway table, never ours; nft words as the reason', async (t) => {
  const s = scripted((_argv, stdin) =>
    stdin.includes('flowtable')
      ? {
          code: 1,
          stderr: 'Error: Could not process rule: No such file or directory\nadd flowtable inet flowhint_probe p\n',
        }
      : {},
  );
  const nft = makeNft(s.run);
  t.same(await probeFlowtable(nft), { supported: false, reason: 'Could not process rule: No such file or directory' });
  t.same(await probeCtTimeout(nft), { supported: true, reason: '' });
  for (const c of s.calls) {
    t.same(c.argv.slice(0, 2), ['nft', '-c'], 'only ever nft -c');
    t.notOk(/inet flowhint /.test(c.stdin), 'never the agent table');
  }
  t.match(s.calls[0]?.stdin, /add flowtable inet flowhint_probe p \{ hook ingress priority filter; \}\n/);
  t.match(
    s.calls[0]?.stdin,
    /add rule inet flowhint_probe c meta l4proto tcp ct packets > 1 fib saddr \. iif oif exists flow add @p\n/,
  );
  t.match(
    s.calls[1]?.stdin,
    /add ct timeout inet flowhint_probe t \{ protocol udp; l3proto ip; policy = \{ unreplied : 5, replied : 5 \}; \}\n/,
  );
  const none = makeNft(scripted(() => ({ code: 127, stderr: '' })).run);
  t.same(await probeFlowtable(none), { supported: false, reason: 'the nft binary is not installed' });
});

t.test('a timeout policy with every state at the kernel default lists as null (nft 1.0.6 -j)', async (t) => {
  // As nft -j printed it for a ShortLived UDP policy of 2m on a node with default timeouts.
  const json =
    '{"nftables": [{"metainfo": {"version": "1.0.6", "release_name": "Lester Gooch #5", "json_schema_version": 1}}, {"table": {"family": "inet", "name": "flowhint", "handle": 1}}, {"ct timeout": {"family": "inet", "name": "c4_ebf4000789984a0a", "table": "flowhint", "handle": 2, "protocol": "udp", "l3proto": "ip", "policy": null}}]}';
  t.same(parseListing(json).ctTimeouts.get('c4_ebf4000789984a0a'), { protocol: 'udp', l3proto: 'ip', policy: {} });
});

/**
 * The real agent against this machine's real kernel, in scratch network namespaces. The
 * host kernel has nf_tables but no flowtables, so the agent runs degraded, as designed:
 * everything but the flowtable and `flow add` is programmed and checked here.
 */
import t from 'tap';
import { rmSync, writeFileSync } from 'node:fs';
import { makeNft } from '../../agent/nft/nft.ts';
import { join } from 'node:path';
import { capturedLogs } from '../helpers/logs.ts';
import { expectOffloads, offloads, viewText } from '../helpers/table-view.ts';
import { list, setup, yaml } from '../helpers/netns-agent.ts';

t.test('degraded on this kernel, as designed: says so, programs counters and chains', async (t) => {
  const { ns, dir, metrics, make } = setup(t);
  writeFileSync(join(dir, 'a.yaml'), yaml('a', '10.96.0.10'));
  const { agent } = make();
  await agent.prepare();
  const r = await agent.sync();
  t.ok(r.ok, r.error ?? 'ok');
  t.equal(r.kind, 'full');
  const doc = agent.statusDoc();
  t.equal(doc.node.mode, 'degraded');
  t.match(doc.node.detail, /kernel has no flowtable support/);
  t.equal(doc.node.conntrackAccounting.enabled, true, 'agent set nf_conntrack_acct=1 in the namespace');
  t.equal(ns.sh('sysctl', '-n', 'net.netfilter.nf_conntrack_acct').trim(), '1');
  t.match(
    await metrics.registry.getSingleMetricAsString('flowhint_agent_flowtable_supported'),
    /flowhint_agent_flowtable_supported 0/,
  );
  const text = list(ns);
  t.notMatch(text, /flowtable|flow add/);
  t.match(text, /10\.96\.0\.10 : goto v4_[0-9a-f]{16}/);
  t.match(text, /ct original proto-dst 80 ct packets > 20 update @seen4 \{ ct original ip daddr \}/);
  t.match(text, /192\.0\.2\.1 : goto/, 'NodePort on the node address');
  await agent.stop();
});

t.test('full, then incremental; drift repaired; restart idempotent', async (t) => {
  const { ns, dir, metrics, make } = setup(t);
  writeFileSync(join(dir, 'a.yaml'), yaml('a', '10.96.0.10'));
  const { agent, source } = make();
  await agent.prepare();
  t.equal((await agent.sync()).kind, 'full');
  writeFileSync(join(dir, 'b.yaml'), yaml('b', '10.96.0.11', ', flowhint.dev/offload-after-packets: "500"'));
  await source.rescan();
  const inc = await agent.sync();
  t.equal(inc.kind, 'partial');
  t.ok(inc.ok, inc.error ?? 'ok');
  t.match(list(ns), /10\.96\.0\.11 : goto/);
  t.match(list(ns), /ct packets > 500 /);
  rmSync(join(dir, 'a.yaml'));
  await source.rescan();
  t.ok((await agent.sync()).ok);
  t.notMatch(list(ns), /10\.96\.0\.10/);
  const good = list(ns);

  // Someone flushes our table: the periodic full resync repairs it.
  ns.sh('nft', 'flush', 'table', 'inet', 'flowhint');
  agent.requestFull();
  const repair = await agent.sync();
  t.equal(repair.kind, 'full');
  t.equal(repair.drift, true, 'drift detected');
  t.equal(list(ns), good, 'table repaired');
  t.match(
    await metrics.registry.getSingleMetricAsString('flowhint_agent_drift_repairs_total'),
    /flowhint_agent_drift_repairs_total 1/,
  );
  await agent.stop();

  // A second agent (a restart) converges on the same ruleset, byte for byte.
  const again = make();
  await again.agent.prepare();
  const r = await again.agent.sync();
  t.ok(r.ok);
  t.equal(r.drift, false, 'a new agent finds no drift in a good table');
  t.equal(list(ns), good, 'restart leaves the ruleset unchanged');
  await again.agent.stop();
});

t.test(
  'a table tampered in place (an element re-pointed, a port changed) is drift: logged, counted, repaired',
  async (t) => {
    const { logger, lines } = capturedLogs();
    const { ns, dir, metrics, make } = setup(t, 'nft', logger);
    writeFileSync(join(dir, 'a.yaml'), yaml('a', '10.96.0.10'));
    writeFileSync(join(dir, 'b.yaml'), yaml('b', '10.96.0.11', ', flowhint.dev/offload-after-packets: "500"'));
    const { agent } = make();
    await agent.prepare();
    t.ok((await agent.sync()).ok);
    const good = list(ns);
    // Written from the manifests: each address, its ports, its threshold (degraded: no flow add).
    const want = viewText(
      expectOffloads(
        [
          { addrs: ['10.96.0.10'], ports: [{ port: 80 }, { proto: 'udp', port: 53 }] },
          {
            addrs: ['10.96.0.11'],
            ports: [
              { port: 80, threshold: 500 },
              { proto: 'udp', port: 53, threshold: 500 },
            ],
          },
        ],
        false,
      ),
    );
    const view = async () =>
      viewText(
        Object.fromEntries(
          Object.entries(offloads(await makeNft(ns.run).read())).filter(([a]) => a.startsWith('10.96.')),
        ),
      );
    t.equal(await view(), want, 'programmed as the manifests say');
    const full = async () => {
      agent.requestFull();
      return agent.sync();
    };
    const chainOf = (addr: string) =>
      new RegExp(`${addr.replace(/\./g, '\\.')} : goto (v4_[0-9a-f]{16})`).exec(list(ns))?.[1] ?? '';
    const chainA = chainOf('10.96.0.10');
    const chainB = chainOf('10.96.0.11');
    t.not(chainA, chainB, 'two thresholds, two chains');

    // 1. One element re-pointed to the other existing chain: same objects, same counts.
    ns.sh(
      'nft',
      '-f',
      '-',
      `delete element inet flowhint vips4 { 10.96.0.10 }\nadd element inet flowhint vips4 { 10.96.0.10 : goto ${chainB} }\n`,
    );
    t.not(await view(), want, 'tampered');
    const r1 = await full();
    t.equal(r1.drift, true, 'the next full sync reports drift');
    t.equal(await view(), want, 'and repairs it');
    t.equal(list(ns), good);

    // 2. One rule's port changed, in place (replace by handle).
    const handle = /proto-dst 80 .*# handle (\d+)/.exec(
      ns.sh('nft', '-a', 'list', 'chain', 'inet', 'flowhint', chainA),
    )?.[1];
    t.ok(handle, 'found the rule');
    ns.sh(
      'nft',
      'replace',
      'rule',
      'inet',
      'flowhint',
      chainA,
      'handle',
      handle ?? '0',
      'meta',
      'l4proto',
      'tcp',
      'ct',
      'original',
      'proto-dst',
      '8080',
      'ct',
      'packets',
      'gt',
      '20',
      'update',
      '@seen4',
      '{',
      'ct',
      'original',
      'ip',
      'daddr',
      '}',
    );
    t.match(list(ns), /proto-dst 8080/, 'tampered');
    const r2 = await full();
    t.equal(r2.drift, true, 'the next full sync reports drift');
    t.equal(await view(), want, 'and repairs it');
    t.equal(list(ns), good);

    const synced = lines.filter((l) => l.msg === 'synced');
    t.same(
      synced.map((l) => l.drift),
      [false, true, true],
      '"drift":true in the log lines of the two repairs',
    );
    const warned = lines
      .filter((l) => Array.isArray(l.differences))
      .map((l) => (l.differences as string[]).join(' | '));
    t.match(warned[0], /map vips4: 10\.96\.0\.10 goes to v4_/, 'says which element');
    t.match(warned[1], /proto-dst 8080/, 'says which rule');
    t.match(
      await metrics.registry.getSingleMetricAsString('flowhint_agent_drift_repairs_total'),
      /flowhint_agent_drift_repairs_total 2/,
    );
    await agent.stop();
  },
);

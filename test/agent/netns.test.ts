/**
 * The real agent against this machine's real kernel, in scratch network namespaces. The
 * host kernel has nf_tables but no flowtables, so the agent runs degraded, as designed:
 * everything but the flowtable and `flow add` is programmed and checked here.
 */
import t from 'tap';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent } from '../../agent/agent.ts';
import { createAgentMetrics } from '../../agent/report/metrics.ts';
import { makeNft } from '../../agent/nft/nft.ts';
import { FileSource } from '../../agent/sources/files.ts';
import { silentLogger } from '../../lib/log.ts';
import { capturedLogs } from '../helpers/logs.ts';
import { createNetns, type Netns } from '../helpers/netns.ts';
import { expectOffloads, offloads, viewText } from '../helpers/table-view.ts';

const yaml = (name: string, ip: string, extra = '') => `apiVersion: v1
kind: Service
metadata:
  name: ${name}
  namespace: demo
  annotations: {flowhint.dev/traffic-hint: LongLived${extra}}
spec:
  clusterIP: ${ip}
  clusterIPs: [${ip}]
  ports: [{port: 80, protocol: TCP}, {port: 53, protocol: UDP, nodePort: 30053}]
`;

function setup(t: { teardown: (fn: () => void) => void }, nftBinary = 'nft', logger = silentLogger()) {
  const ns = createNetns();
  const dir = mkdtempSync(join(tmpdir(), 'flowhint-svcs-'));
  const state = mkdtempSync(join(tmpdir(), 'flowhint-state-'));
  t.teardown(() => {
    ns.destroy();
    rmSync(dir, { recursive: true, force: true });
    rmSync(state, { recursive: true, force: true });
  });
  const metrics = createAgentMetrics({ defaultMetrics: false });
  const make = () => {
    const source = new FileSource({ dir, logger: silentLogger(), pollMs: 60_000 });
    const agent = new Agent({
      run: ns.run,
      nft: makeNft(ns.run, nftBinary),
      source,
      logger,
      metrics,
      defaultThreshold: 20,
      devices: {},
      counter: true,
      stateDir: state,
      backoff: { initialMs: 10, maxMs: 50 },
    });
    return { agent, source };
  };
  return { ns, dir, state, metrics, make };
}

const list = (ns: Netns) =>
  ns.sh('nft', 'list', 'table', 'inet', 'flowhint').replace(/ counter packets \d+ bytes \d+/g, '');

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

t.test('a failing transaction keeps the previous ruleset; the retry is full and recovers', async (t) => {
  const bin = mkdtempSync(join(tmpdir(), 'flowhint-nft-'));
  t.teardown(() => rmSync(bin, { recursive: true, force: true }));
  const flag = join(bin, 'fail');
  const wrapper = join(bin, 'nft');
  // Fails transactions (nft -f) while the flag file exists; reads and checks pass through.
  writeFileSync(
    wrapper,
    `#!/bin/sh\nif [ -e '${flag}' ] && [ "$1" = "-f" ]; then echo "Error: injected failure" >&2; exit 1; fi\nexec nft "$@"\n`,
  );
  chmodSync(wrapper, 0o755);
  const { ns, dir, metrics, make } = setup(t, wrapper);
  writeFileSync(join(dir, 'a.yaml'), yaml('a', '10.96.0.10'));
  const { agent, source } = make();
  await agent.prepare();
  t.ok((await agent.sync()).ok);
  const before = list(ns);
  writeFileSync(flag, '');
  writeFileSync(join(dir, 'b.yaml'), yaml('b', '10.96.0.11'));
  await source.rescan();
  const failed = await agent.sync();
  t.equal(failed.ok, false);
  t.match(failed.error, /injected failure/);
  t.equal(list(ns), before, 'previous ruleset intact');
  t.equal(agent.statusDoc().lastSync?.ok, false);
  rmSync(flag);
  const retry = await agent.sync();
  t.equal(retry.kind, 'full', 'the retry is a full sync');
  t.ok(retry.ok);
  t.match(list(ns), /10\.96\.0\.11 : goto/);
  t.match(await metrics.registry.getSingleMetricAsString('flowhint_agent_sync_failures_total'), /kind="partial"\} 1/);
  await agent.stop();
});

t.test('devices come and go without breaking syncs (degraded: no flowtable to carry them)', async (t) => {
  const { ns, dir, make } = setup(t);
  writeFileSync(join(dir, 'a.yaml'), yaml('a', '10.96.0.10'));
  const { agent, source } = make();
  await agent.prepare();
  t.ok((await agent.sync()).ok);
  ns.sh('ip', 'link', 'add', 'veth9', 'type', 'veth', 'peer', 'name', 'veth10');
  ns.sh('ip', 'link', 'set', 'veth9', 'up');
  ns.sh('ip', 'link', 'del', 'eth0');
  writeFileSync(join(dir, 'b.yaml'), yaml('b', '10.96.0.11'));
  await source.rescan();
  const r = await agent.sync();
  t.ok(r.ok, r.error ?? 'ok');
  await agent.stop();
});

t.test('cleanup on exit removes the table', async (t) => {
  const { ns, dir, make } = setup(t);
  writeFileSync(join(dir, 'a.yaml'), yaml('a', '10.96.0.10'));
  const { agent } = make();
  await agent.prepare();
  t.ok((await agent.sync()).ok);
  await agent.stop({ cleanup: true });
  t.throws(() => ns.sh('nft', 'list', 'table', 'inet', 'flowhint'));
});

t.test('a refused Service is reported once per refusal: again after it is fixed and broken again', async (t) => {
  const { dir, metrics, make } = setup(t);
  const refused = async () =>
    (await metrics.registry.getSingleMetric('flowhint_agent_invalid_hints_total')?.get())?.values.find(
      (v) => v.labels.code === 'FH_HINT_UNSUPPORTED',
    )?.value ?? 0;
  const turbo = yaml('a', '10.96.0.10').replace('traffic-hint: LongLived', 'traffic-hint: Turbo');
  writeFileSync(join(dir, 'a.yaml'), turbo);
  const { agent, source } = make();
  await agent.prepare();
  await agent.sync();
  t.equal(await refused(), 1, 'refused once');
  await source.rescan();
  await source.rescan();
  t.equal(await refused(), 1, 'not again while nothing changes');
  writeFileSync(join(dir, 'a.yaml'), yaml('a', '10.96.0.10'));
  await source.rescan();
  t.same(agent.statusDoc().invalid, [], 'fixed: no longer listed');
  writeFileSync(join(dir, 'a.yaml'), turbo);
  await source.rescan();
  t.equal(await refused(), 2, 'broken again: reported and counted again');
  t.same(
    agent.statusDoc().invalid.map((i) => `${i.service}:${i.code}`),
    ['demo/a:FH_HINT_UNSUPPORTED'],
  );
  await agent.stop();
});

t.test(
  'ShortLived: timeout objects and elements in the real kernel; switched to LongLived and back; no false drift',
  async (t) => {
    const { ns, dir, make } = setup(t);
    const short = (timeout = '') =>
      yaml('dns', '10.96.0.53').replace('traffic-hint: LongLived', `traffic-hint: ShortLived${timeout}`);
    writeFileSync(join(dir, 'dns.yaml'), short());
    const { agent, source } = make();
    await agent.prepare();
    t.equal(agent.statusDoc().node.conntrackTimeout?.supported, true, 'this kernel has ct timeout objects');
    t.ok((await agent.sync()).ok);
    let text = list(ns);
    // Expected from the manifest: TCP 80 and UDP 53 on the ClusterIP, UDP NodePort 30053 on the node address, 5 s.
    t.match(
      text,
      /ct timeout c4_[0-9a-f]{16} \{\s+protocol udp\s+l3proto ip\s+policy = \{ unreplied : 5, replied : 5 \}/,
    );
    t.match(
      text,
      /ct timeout c4_[0-9a-f]{16} \{\s+protocol tcp\s+l3proto ip\s+policy = \{ fin_wait : 5, close_wait : 5, last_ack : 5, time_wait : 5, close : 5 \}/,
    );
    t.notMatch(text, /established/.source.replace('established', 'established :'), 'never the established state');
    t.match(text, /10\.96\.0\.53 \. tcp \. 80 : goto s4_/);
    t.match(text, /10\.96\.0\.53 \. udp \. 53 : goto s4_/);
    t.match(text, /192\.0\.2\.1 \. udp \. 30053 : goto s4_/);
    t.notMatch(text, /10\.96\.0\.53 : goto v4_/, 'not offloaded');
    t.match(agent.statusDoc().services[0], { service: 'demo/dns', hint: 'ShortLived', timeoutSeconds: 5 });

    writeFileSync(join(dir, 'dns.yaml'), yaml('dns', '10.96.0.53'));
    await source.rescan();
    const toLong = await agent.sync();
    // The last ShortLived Service goes and the first LongLived one comes: the table's shape
    // (flowtable, forward chain, output chain) changes, which is a full sync.
    t.equal(toLong.kind, 'full');
    text = list(ns);
    t.match(text, /10\.96\.0\.53 : goto v4_/, 'LongLived: offloaded');
    t.match(text, /elements = \{[^}]*10\.96\.0\.53 \. tcp \. 80/, 'its new connections are marked');
    t.notMatch(text, /ct timeout c4_|: goto s4_/, 'and its timeout objects and elements are gone');
    t.notMatch(text, /chain new_out/, 'and so is the output chain only ShortLived needs');

    writeFileSync(join(dir, 'dns.yaml'), short(', flowhint.dev/conntrack-timeout: "2m"'));
    await source.rescan();
    t.ok((await agent.sync()).ok);
    text = list(ns);
    // nft lists only the values that differ from the kernel's defaults (UDP replied and TCP
    // fin_wait/time_wait are 120 s by default), so 2m shows as these.
    t.match(text, /policy = \{ unreplied : 120 \}/, 'back to ShortLived, with its own 2m (UDP)');
    t.match(text, /policy = \{ close_wait : 120, last_ack : 120, close : 120 \}/, 'and TCP');
    t.notMatch(text, /10\.96\.0\.53 : goto v4_/);

    agent.requestFull();
    const full = await agent.sync();
    t.equal(full.drift, false, 'a full resync over the partial syncs finds no drift');
    t.equal(list(ns), text, 'and changes nothing');
    await agent.stop();
  },
);

/**
 * The real agent in scratch network namespaces, continued (test/agent/netns.test.ts has the
 * syncs): failures, device churn, cleanup and refusals, against this kernel's real nft.
 */
import t from 'tap';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { list, setup, yaml } from '../helpers/netns-agent.ts';

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
    // The node as kube-proxy sets it: ShortLived must keep these, not nft's built-in five days.
    const sysctl = (established: number) =>
      ns.sh(
        'sysctl',
        '-q',
        '-w',
        `net.netfilter.nf_conntrack_tcp_timeout_established=${established}`,
        'net.netfilter.nf_conntrack_tcp_timeout_close_wait=3600',
      );
    sysctl(86400);
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
      /ct timeout c4_[0-9a-f]{16} \{\s+protocol tcp\s+l3proto ip\s+policy = \{ established : 86400, close_wait : 3600, last_ack : 5, time_wait : 5, close : 5 \}/,
      "the node's established and close_wait; only the states no side sends in are shortened",
    );
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
    // nft lists only the values that differ from the kernel's defaults. 2m is longer than every
    // UDP state and TCP's last_ack and close, and equal to time_wait: nothing is lengthened.
    t.match(text, /protocol udp\s+l3proto ip\s+policy = \{ {2}\}/, 'back to ShortLived, 2m: the node values (UDP)');
    t.match(text, /protocol tcp\s+l3proto ip\s+policy = \{ established : 86400, close_wait : 3600 \}/, 'and TCP');
    t.notMatch(text, /10\.96\.0\.53 : goto v4_/);

    sysctl(7200);
    await agent.reprobe();
    const resync = await agent.sync();
    t.equal(resync.kind, 'full', 'a changed node timeout is a full sync');
    t.equal(resync.error, undefined);
    const after = list(ns);
    t.match(after, /policy = \{ established : 7200, close_wait : 3600 \}/, 'the policy follows the node');
    t.notMatch(after, /established : 86400/, 'and the old object is gone');
    text = after;

    agent.requestFull();
    const full = await agent.sync();
    t.equal(full.drift, false, 'a full resync over the partial syncs finds no drift');
    t.equal(list(ns), text, 'and changes nothing');
    await agent.stop();
  },
);

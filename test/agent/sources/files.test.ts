import t from 'tap';
import { mkdirSync, mkdtempSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FileSource, parseManifests } from '../../../agent/sources/files.ts';
import { silentLogger } from '../../../lib/log.ts';
import { eventually } from '../../helpers/eventually.ts';

const doc = (name: string, hint = 'LongLived', ip = '10.96.0.10') => `apiVersion: v1
kind: Service
metadata: {name: ${name}, namespace: demo, annotations: {flowhint.dev/traffic-hint: "${hint}"}}
spec: {clusterIP: ${ip}, clusterIPs: [${ip}], ports: [{port: 80}]}
`;

t.test('parseManifests: multi-document, List, defaulting, rejections with codes', async (t) => {
  const text = [
    doc('a', ' longlived'),
    doc('bad', 'Turbo'),
    'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n',
    '',
    'apiVersion: v1\nkind: Service\nmetadata: {namespace: demo}\n',
  ].join('---\n');
  const r = parseManifests('f.yaml', text);
  t.same(
    r.services.map(([k]) => k),
    ['demo/a'],
  );
  const a = r.services[0]![1] as { metadata: { annotations: Record<string, string>; labels: Record<string, string> } };
  t.equal(a.metadata.annotations['flowhint.dev/traffic-hint'], 'LongLived', 'defaulted as the webhook would');
  t.equal(a.metadata.labels['flowhint.dev/traffic-hint'], 'LongLived', 'mirror label written');
  t.same(
    r.rejected.map((x) => [x.key, x.code]),
    [
      ['demo/bad', 'FH_HINT_UNSUPPORTED'],
      [undefined, 'FH_MANIFEST_UNNAMED'],
    ],
  );
  t.match(r.rejected[0]!.reason, /unsupported value "Turbo"/);
  t.equal(r.ignored, 1, 'the ConfigMap is ignored');
  const list = parseManifests(
    'l.json',
    JSON.stringify({
      apiVersion: 'v1',
      kind: 'List',
      items: [
        JSON.parse(
          JSON.stringify({
            apiVersion: 'v1',
            kind: 'Service',
            metadata: { name: 'j', namespace: 'demo', annotations: { 'flowhint.dev/traffic-hint': 'LongLived' } },
            spec: { clusterIP: '10.96.0.9', ports: [{ port: 1 }] },
          }),
        ),
      ],
    }),
  );
  t.same(
    list.services.map(([k]) => k),
    ['demo/j'],
    'JSON and kind: List',
  );
  t.equal(parseManifests('x.yaml', 'a: [').rejected[0]?.code, 'FH_MANIFEST_UNPARSABLE');
});

t.test('add, change and remove manifests while the source runs', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'flowhint-files-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(join(dir, 'a.yaml'), doc('a'));
  writeFileSync(join(dir, '.hidden.yaml'), doc('hidden'));
  writeFileSync(join(dir, 'notes.txt'), doc('txt'));
  const state = new Map<string, unknown>();
  const refused = new Map<string, string>();
  let synced = 0;
  const source = new FileSource({ dir, logger: silentLogger(), pollMs: 200 });
  await source.start({
    events: (evs) => {
      for (const e of evs) {
        if (e.type === 'upsert') state.set(e.key, e.object);
        else state.delete(e.key);
      }
    },
    synced: () => (synced += 1),
    refused: (key, r) => (r ? refused.set(key, r.code) : refused.delete(key)),
  });
  t.teardown(() => source.stop());
  t.equal(synced, 1);
  t.same([...state.keys()], ['demo/a'], 'dotfiles and other extensions skipped');
  writeFileSync(join(dir, 'b.yaml'), doc('b') + '---\n' + doc('c', 'Nope'));
  await eventually('b added, c refused', () => state.has('demo/b') && refused.get('demo/c') === 'FH_HINT_UNSUPPORTED');
  t.notOk(state.has('demo/c'), 'the rejected document is not programmed; the rest are');
  writeFileSync(join(dir, 'a.yaml'), doc('a', 'LongLived', '10.96.0.99'));
  await eventually('a changed', () => JSON.stringify(state.get('demo/a')).includes('10.96.0.99'));
  writeFileSync(join(dir, 'b.yaml'), doc('b') + '---\n' + doc('c'));
  await eventually('c fixed', () => state.has('demo/c') && !refused.has('demo/c'));
  rmSync(join(dir, 'b.yaml'));
  await eventually('b and c removed', () => !state.has('demo/b') && !state.has('demo/c'));
  t.same([...state.keys()], ['demo/a']);

  // ConfigMap-volume style update: a new directory swapped in through ..data symlinks.
  const v1 = join(dir, '..v1');
  mkdirSync(v1);
  writeFileSync(join(v1, 'd.yaml'), doc('d'));
  symlinkSync('..v1', join(dir, '..data_tmp'));
  renameSync(join(dir, '..data_tmp'), join(dir, '..data'));
  symlinkSync('..data/d.yaml', join(dir, 'd.yaml'));
  await eventually('d via symlink', () => state.has('demo/d'));
});

t.test('an unreadable directory keeps the current Services', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'flowhint-files-'));
  writeFileSync(join(dir, 'a.yaml'), doc('a'));
  const state = new Map<string, unknown>();
  const source = new FileSource({ dir, logger: silentLogger(), pollMs: 60_000 });
  await source.start({
    events: (evs) => {
      for (const e of evs) {
        if (e.type === 'upsert') state.set(e.key, e.object);
        else state.delete(e.key);
      }
    },
    synced: () => {},
  });
  rmSync(dir, { recursive: true, force: true });
  await source.rescan();
  t.same([...state.keys()], ['demo/a'], 'not an empty directory: nothing removed');
  await source.stop();
});

t.test('an agent on the file source: a refused manifest is logged once, naming the file and the Service', async (t) => {
  const { Agent } = await import('../../../agent/agent.ts');
  const { createAgentMetrics } = await import('../../../agent/report/metrics.ts');
  const { FakeNft, fakeHost } = await import('../../helpers/fake-nft.ts');
  const { capturedLogs } = await import('../../helpers/logs.ts');
  const dir = mkdtempSync(join(tmpdir(), 'fh-files-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(join(dir, 'svc.yaml'), [doc('good', 'LongLived', '10.96.0.11'), doc('bad', 'Turbo')].join('---\n'));
  writeFileSync(join(dir, 'junk.yaml'), 'a: [');
  const nft = new FakeNft();
  const { logger, lines } = capturedLogs();
  const source = new FileSource({ dir, logger, pollMs: 20 });
  const agent = new Agent({
    run: fakeHost(nft),
    nft,
    source,
    logger,
    metrics: createAgentMetrics({ defaultMetrics: false }),
    defaultThreshold: 20,
    devices: {},
    counter: true,
  });
  await agent.prepare();
  t.ok((await agent.sync()).ok);
  await source.rescan();
  await source.rescan();
  const about = (what: string) => lines.filter((l) => JSON.stringify(l).includes(what));
  t.equal(about('demo/bad').length, 1, 'one line for the refused Service');
  t.match(about('demo/bad')[0], { service: 'demo/bad', code: 'FH_HINT_UNSUPPORTED', where: 'svc.yaml#1' });
  t.equal(about('junk.yaml').length, 1, 'one line for a file that names no Service');
  t.same(
    agent.statusDoc().invalid.map((i) => i.service),
    ['demo/bad'],
  );
  await agent.stop();
});

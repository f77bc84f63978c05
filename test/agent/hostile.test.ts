/** Nothing user-controlled reaches nft text beyond validated addresses, ports and protocols. */
import t from 'tap';
import { readHint } from '../../api/index.ts';
import { buildDesired, serviceEntry } from '../../agent/state/desired.ts';
import { renderFull } from '../../agent/nft/render.ts';
import { parseAddress } from '../../agent/state/address.ts';
import { svc } from '../helpers/agent.ts';

const breakers = [
  ';',
  '}',
  '{',
  '\n',
  '\r',
  '"',
  "'",
  '#',
  '\\',
  '$',
  '`',
  '\u0000',
  ' flush ruleset',
  '\u2028',
  '../',
  '@fastpath',
  'goto x',
];

/** Assertion names must not carry line separators into the TAP stream. */
const show = (s: string) => JSON.stringify(s).replace(/[\u2028\u2029]/g, (c) => `\\u${c.charCodeAt(0).toString(16)}`);

function render(obj: Record<string, unknown>): string {
  const r = readHint(obj);
  if (!r.usable) return '';
  return renderFull(buildDesired([serviceEntry(r.hint, 20)], [parseAddress('10.0.0.1')!]), {
    flowtable: true,
    devices: ['eth0'],
    counter: true,
  });
}

/** Everything a rendering may contain once hashes, addresses, ports and keywords are removed. */
/** (`&`, `|` and `!` come from the mark rules: constants.) */
const ALLOWED = /^[a-z0-9_ @{}:;>=",.+&|!\n-]*$/;

t.test('hostile names, namespaces, annotations and labels render nothing of themselves', async (t) => {
  const base = render(svc({ name: 'web', namespace: 'ns' }));
  for (const b of breakers) {
    const hostile = svc({ name: `web${b}x`, namespace: `ns${b}`, clusterIPs: ['10.96.0.10'] });
    const meta = hostile.metadata as Record<string, any>;
    meta.annotations['evil'] = `x${b}`;
    meta.labels[`evil${b}`] = `y${b}`;
    const text = render(hostile);
    t.ok(text.length > 0, `the hostile Service is usable and rendered for ${show(b)}`);
    t.notOk(text.includes(`web${b}`), `name fragment ${show(b)} absent`);
    t.match(text, ALLOWED, `only safe characters for ${show(b)}`);
    // Same shape as the benign rendering: only the hash-derived names differ.
    t.equal(text.replace(/[0-9a-f]{16}/g, 'H'), base.replace(/[0-9a-f]{16}/g, 'H'), `same structure for ${show(b)}`);
  }
});

t.test('hostile addresses and ports are dropped, never rendered', async (t) => {
  const bad = [
    '10.96.0.10; flush ruleset',
    '10.96.0.10 }',
    'fe80::1%eth0',
    '1.2.3',
    '::',
    '0.0.0.0',
    '[::1]',
    'None',
    '',
    '10.96.0.010',
    '1.2.3.4\n',
  ];
  for (const ip of bad) {
    const text = render(svc({ name: 'x', clusterIPs: [ip, '10.96.0.99'] }));
    t.notOk(text.includes(ip) && ip.length > 0 && ip !== '10.96.0.99', `dropped ${JSON.stringify(ip)}`);
    t.match(text, ALLOWED);
  }
  const ports = render(
    svc({
      name: 'p',
      ports: [{ port: 0 }, { port: 70000 }, { port: 80, protocol: 'TCP; flush ruleset' }, { port: 443 }],
    }),
  );
  t.notMatch(ports, /flush ruleset|70000|proto-dst 0 |\. 0 \}/);
  t.match(ports, /proto-dst 443 /);
});

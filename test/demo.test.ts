/** `npm start` end to end, in both modes: real scratch netns (root + nft) and dry run. */
import t from 'tap';
import { spawnSync } from 'node:child_process';

function demo(...args: string[]) {
  const r = spawnSync(process.execPath, ['bin/flowhint.ts', 'demo', ...args], { encoding: 'utf8', timeout: 120_000 });
  return { code: r.status, out: r.stdout, err: r.stderr };
}

for (const mode of ['netns', 'dry-run'] as const) {
  t.test(`demo (${mode})`, async (t) => {
    const r = demo(...(mode === 'dry-run' ? ['--dry-run'] : []));
    t.equal(r.code, 0, r.err);
    t.match(
      r.out,
      /REJECTED {2}shop\/turbo .*\n\s+.*unsupported value "Turbo"; supported values: "LongLived", "ShortLived"/,
    );
    t.match(r.out, /REJECTED {2}shop\/huge-threshold .*\n\s+.*must be a decimal integer from 0 to 1000000/);
    t.match(r.out, /REJECTED {2}storage\/db .*\n\s+.*headless Service/);
    t.match(r.out, /PATCHED {3}storage\/backup .*\n\s+patch: .*"value":"LongLived"/);
    t.match(
      r.out,
      /PATCHED {3}shop\/spoof .*\n\s+patch: \[\{"op":"remove","path":"\/metadata\/labels\/flowhint.dev~1traffic-hint"\}\]/,
    );
    t.match(r.out, /warning: flowhint: SCTP port\(s\) 2905 are not offloaded/);
    t.match(r.out, /PATCHED {3}infra\/resolver .*\n\s+patch: .*"value":"5s".*"value":"ShortLived"/);
    t.match(
      r.out,
      /REJECTED {2}shop\/batch .*\n\s+.*conntrack-timeout: invalid value "1h"; must be a whole number of seconds or minutes/,
    );
    t.match(r.out, /10\.96\.10\.53 \. udp \. 53 : goto s4_[0-9a-f]{16}/, 'the ShortLived Service in the timeout map');
    t.notMatch(r.out, /10\.96\.10\.53 : goto/, 'and not offloaded');
    for (const ip of ['10.96.10.10', '10.96.10.30', '10.96.10.40', '10.96.10.90', 'fd00:96::30'])
      t.match(r.out, new RegExp(`${ip.replace(/\./g, '\\.')} : goto v[46]_`), `${ip} programmed`);
    for (const ip of ['10.96.10.20', '10.96.10.50', '10.96.10.60', '10.96.10.80'])
      t.notMatch(r.out, new RegExp(`${ip.replace(/\./g, '\\.')} : goto`), `${ip} not programmed`);
    if (mode === 'netns') {
      t.match(r.out, /== agent: programmed network namespace flowhint-demo \(ok/);
      t.match(r.out, /node: degraded: kernel has no flowtable support|node: supported/);
      t.match(r.out, /media\/video\s+10\.96\.10\.10\s+tcp\/1935\s+after 20 packets/);
      t.match(r.out, /infra\/dns-over-tcp .* after 1000 packets/);
      t.match(r.out, /infra\/resolver\s+10\.96\.10\.53\s+tcp\/53,udp\/53\s+ShortLived: conntrack timeout 5s/);
    } else {
      t.match(r.out, /dry run/);
      t.match(r.out, /flow add @fastpath/);
    }
    t.match(
      r.out.trimEnd().split('\n').at(-1),
      /^to see real offload: `npm run test:kernel`/,
      'the last line says how to see real offload',
    );
    const left = spawnSync('ip', ['netns', 'list'], { encoding: 'utf8' }).stdout;
    t.notMatch(left, /flowhint-demo/, 'no namespace left behind');
  });
}

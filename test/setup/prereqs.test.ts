/**
 * `npm test`'s pretest step, where it cannot install: not root, and the tools not on PATH.
 * It must stop with one line naming the packages and the command: no stack trace.
 */
import t from 'tap';
import { spawnSync } from 'node:child_process';
import { chmodSync, copyFileSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

t.test(
  'not root and nothing on PATH: one clear line, exit 1 (the suite runs as root, so it can drop to nobody)',
  async (t) => {
    // An empty PATH directory: no nft, ip, conntrack, iptables-restore, kustomize; node by its absolute path.
    const empty = mkdtempSync(join(tmpdir(), 'flowhint-path-'));
    // nobody may not be able to enter the checkout (root's home is mode 700): run node and the
    // step from a copy it can read, wherever the checkout lives.
    const copy = mkdtempSync(join(tmpdir(), 'flowhint-prereqs-'));
    t.teardown(() => {
      rmSync(empty, { recursive: true, force: true });
      rmSync(copy, { recursive: true, force: true });
    });
    mkdirSync(join(copy, 'test/setup'), { recursive: true });
    for (const f of ['test/setup/prereqs.ts', 'test/setup/tools.ts']) copyFileSync(f, join(copy, f));
    copyFileSync(process.execPath, join(copy, 'node'));
    for (const d of [copy, join(copy, 'test'), join(copy, 'test/setup'), empty]) chmodSync(d, 0o755);
    chmodSync(join(copy, 'node'), 0o755);
    const r = spawnSync(
      '/usr/bin/setpriv',
      [
        '--reuid=65534',
        '--regid=65534',
        '--clear-groups',
        '/usr/bin/env',
        '-i',
        `PATH=${empty}`,
        `HOME=${empty}`,
        join(copy, 'node'),
        join(copy, 'test/setup/prereqs.ts'),
      ],
      { encoding: 'utf8', env: { PATH: empty, HOME: empty }, cwd: copy },
    );
    t.equal(r.status, 1, 'exit 1');
    const lines = r.stderr.trim().split('\n');
    t.equal(lines.length, 1, `one line: ${r.stderr}`);
    t.match(
      lines[0],
      /^prereqs: missing nft \(.*\), ip \(.*\), conntrack \(.*\), iptables-restore \(.*\); install them with: apt-get install -y nftables iproute2 conntrack iptables \(as root\), then run npm test again$/,
    );
    t.notMatch(r.stderr, /\n\s+at /, 'no stack trace');
  },
);

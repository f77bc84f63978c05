/**
 * `npm test`'s pretest step, where it cannot install: not root, and the tools not on PATH.
 * It must stop with one line naming the packages and the command: no stack trace.
 */
import t from 'tap';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

t.test(
  'not root and nothing on PATH: one clear line, exit 1 (the suite runs as root, so it can drop to nobody)',
  async (t) => {
    // An empty PATH directory: no nft, ip, conntrack, iptables-restore, kustomize; node by its absolute path.
    const empty = mkdtempSync(join(tmpdir(), 'flowhint-path-'));
    t.teardown(() => rmSync(empty, { recursive: true, force: true }));
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
        process.execPath,
        'test/setup/prereqs.ts',
      ],
      { encoding: 'utf8', env: { PATH: empty, HOME: empty } },
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

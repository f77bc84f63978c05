/**
 * The documentation holds: the README stays short, every relative link in README.md and
 * docs/ resolves (the file, and the heading an anchor names), and every command synopsis in
 * them is the one the command's own `--help` prints.
 */
import t from 'tap';
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { dirname, join, normalize } from 'node:path';

const root = new URL('../', import.meta.url).pathname;
const pages = [
  'README.md',
  ...readdirSync(join(root, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
];
const read = (page: string) => readFileSync(join(root, page), 'utf8');

/** GitHub's heading anchor: lower case, punctuation dropped, spaces to hyphens. */
export function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N} _-]/gu, '')
    .replace(/ /g, '-');
}

function anchors(page: string): Set<string> {
  const text = read(page).replace(/```[\s\S]*?```/g, '');
  return new Set([...text.matchAll(/^#{1,6} (.+)$/gm)].map((m) => slug(m[1] ?? '')));
}

t.test('README is at most 250 lines', async (t) => {
  t.ok(read('README.md').split('\n').length <= 250, `${read('README.md').split('\n').length} lines`);
});

t.test('every relative link resolves, anchors included', async (t) => {
  const broken: string[] = [];
  for (const page of pages) {
    const text = read(page).replace(/```[\s\S]*?```/g, '');
    for (const m of text.matchAll(/\]\(([^)\s]+)\)/g)) {
      const link = m[1] ?? '';
      if (/^[a-z]+:/.test(link)) continue;
      const [path = '', anchor] = link.split('#');
      const target = path === '' ? page : normalize(join(dirname(page), path));
      if (!existsSync(join(root, target))) broken.push(`${page}: ${link} (no ${target})`);
      else if (anchor !== undefined && target.endsWith('.md') && !anchors(target).has(anchor))
        broken.push(`${page}: ${link} (no heading #${anchor} in ${target})`);
    }
  }
  t.same(broken, []);
});

t.test("the slug of a heading is GitHub's", async (t) => {
  t.equal(slug('Compatibility with kube-proxy modes'), 'compatibility-with-kube-proxy-modes');
  t.equal(slug('`ShortLived`: per-Service conntrack timeouts'), 'shortlived-per-service-conntrack-timeouts');
});

/** `flowhint <command> …` synopses in the docs: an indented line and its deeper-indented continuations. */
function docSynopses(): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const page of pages) {
    const lines = read(page).split('\n');
    lines.forEach((line, i) => {
      const m = /^ {4}flowhint ([a-z]+) /.exec(line);
      if (!m) return;
      const parts = [line];
      for (let j = i + 1; j < lines.length && /^ {8}\S/.test(lines[j] ?? ''); j++) parts.push(lines[j] ?? '');
      const list = out.get(m[1] ?? '') ?? [];
      list.push(parts.join(' ').replace(/\s+/g, ' ').trim());
      out.set(m[1] ?? '', list);
    });
  }
  return out;
}

/** The synopsis `flowhint <command> --help` prints: the usage line and its indented continuations. */
function helpSynopsis(command: string): string {
  const r = spawnSync(process.execPath, [join(root, 'bin/flowhint.ts'), command, '--help'], {
    encoding: 'utf8',
    timeout: 20_000,
  });
  const lines = `${r.stdout}${r.stderr}`.split('\n');
  const start = lines.findIndex((l) => l.startsWith('usage: '));
  const parts = [(lines[start] ?? '').slice('usage: '.length)];
  for (let j = start + 1; j < lines.length && /^ {4}\S/.test(lines[j] ?? ''); j++) parts.push(lines[j] ?? '');
  return parts.join(' ').replace(/\s+/g, ' ').trim();
}

t.test('every command synopsis in the docs is the one --help prints', async (t) => {
  const docs = docSynopses();
  for (const command of ['agent', 'status', 'cleanup', 'webhook', 'backfill', 'certs', 'demo', 'explain']) {
    const shown = docs.get(command) ?? [];
    t.ok(shown.length > 0, `${command}: a synopsis in the docs`);
    for (const s of shown) t.equal(s, helpSynopsis(command), `${command}: the docs' synopsis is --help's`);
  }
});

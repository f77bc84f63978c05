/**
 * `npm test`'s pretest step: the system tools the tests need are there before any test runs.
 * As root with apt, what is missing is installed, each with one line saying what and why;
 * otherwise one message names the packages and the command, and the suite does not start
 * (never a stack trace, never a half-run suite).
 */
import { spawnSync } from 'node:child_process';
import {
  APT_TOOLS,
  ToolError,
  fetchKustomize,
  fetchPromtool,
  kustomizeCommand,
  onPath,
  outputText,
  promtoolCommand,
} from './tools.ts';

const say = (s: string) => process.stderr.write(`prereqs: ${s}\n`);
const isRoot = process.getuid?.() === 0;
const canApt = isRoot && onPath('apt-get') && onPath('dpkg');

function fail(message: string): never {
  say(message);
  process.exit(1);
}

const missing = APT_TOOLS.filter((t) => !onPath(t.command));
if (missing.length > 0) {
  const pkgs = missing.map((t) => t.pkg);
  if (!canApt)
    fail(
      `missing ${missing.map((t) => `${t.command} (${t.why})`).join(', ')}; install them with: apt-get install -y ${pkgs.join(' ')} (as root), then run npm test again`,
    );
  say(`installing ${pkgs.join(' ')}: ${missing.map((t) => `${t.command} (${t.why})`).join('; ')}`);
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  const install = () =>
    spawnSync('apt-get', ['install', '-y', '-q', '--no-install-recommends', ...pkgs], {
      stdio: ['ignore', 'ignore', 'pipe'],
      env,
      encoding: 'utf8',
    });
  let r = install();
  if (r.status !== 0) {
    spawnSync('apt-get', ['update', '-q'], { stdio: 'ignore', env });
    r = install();
  }
  if (r.status !== 0)
    fail(
      `apt-get install ${pkgs.join(' ')} failed: ${outputText(r.stderr).trim().split('\n').at(-1)}; install them by hand and run npm test again`,
    );
}

if (!kustomizeCommand()) {
  const hint =
    'a kustomize that builds overlays with components (5.x): put one on PATH, or run npm test as root with apt so it is fetched into .cache/tools';
  if (!canApt) fail(`missing kustomize (the manifest tests build every overlay); ${hint}`);
  say(
    "fetching kustomize from Debian sid into .cache/tools (the manifest tests build every overlay; bookworm's kubectl 1.20 cannot build components)",
  );
  try {
    fetchKustomize();
  } catch (err) {
    fail(`could not fetch kustomize: ${err instanceof ToolError ? err.message : String(err)}; ${hint}`);
  }
}

if (!promtoolCommand()) {
  const hint =
    "Prometheus' promtool: put one on PATH, or run npm test as root with apt so bookworm's prometheus package is unpacked into .cache/tools";
  if (!canApt) fail(`missing promtool (the metrics tests lint both exporters); ${hint}`);
  say("fetching promtool from Debian's prometheus package into .cache/tools (unpacked, not installed)");
  try {
    fetchPromtool();
  } catch (err) {
    fail(`could not fetch promtool: ${err instanceof ToolError ? err.message : String(err)}; ${hint}`);
  }
}

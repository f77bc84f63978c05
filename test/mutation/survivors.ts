/**
 * After `stryker run` (npm run test:mutation): every mutant that survived, or that no test
 * reaches, must be listed in test/mutation-equivalent.md with a reason. Reads Stryker's JSON
 * report (.cache/mutation/mutation.json), prints the score and each survivor the file does
 * not list, and exits 1 if there is one. `--list` prints every survivor as a table row to
 * start from.
 */
import { readFileSync } from 'node:fs';
import { z } from 'zod';

const Report = z.object({
  files: z.record(
    z.string(),
    z.object({
      source: z.string(),
      mutants: z.array(
        z.object({
          mutatorName: z.string(),
          replacement: z.string().optional(),
          status: z.string(),
          location: z.object({ start: z.object({ line: z.number() }) }),
        }),
      ),
    }),
  ),
});

const report = Report.parse(JSON.parse(readFileSync('.cache/mutation/mutation.json', 'utf8')));
const counts = { killed: 0, survived: 0, valid: 0 };
const left: Array<{ key: string; row: string }> = [];
for (const [file, f] of Object.entries(report.files)) {
  const lines = f.source.split('\n');
  for (const m of f.mutants) {
    if (m.status === 'CompileError' || m.status === 'Ignored' || m.status === 'RuntimeError') continue;
    counts.valid += 1;
    if (m.status === 'Killed' || m.status === 'Timeout') {
      counts.killed += 1;
      continue;
    }
    counts.survived += 1;
    const line = m.location.start.line;
    const key = `${file}:${line} ${m.mutatorName}`;
    const code = (lines[line - 1] ?? '').trim().replaceAll('|', '\\|').slice(0, 70);
    const replacement = (m.replacement ?? '').replaceAll('|', '\\|').replace(/\s+/g, ' ').slice(0, 50);
    left.push({
      key,
      row: `| \`${file}:${line}\` | ${m.mutatorName} | \`${code}\` → \`${replacement}\` | ${m.status} |  |`,
    });
  }
}
const score = (100 * counts.killed) / counts.valid;
console.log(
  `mutation score ${score.toFixed(2)} % (${counts.killed} of ${counts.valid} killed, ${counts.survived} survived or not reached)`,
);
if (process.argv.includes('--list')) {
  for (const l of left) console.log(l.row);
  process.exit(0);
}
const listed = readFileSync('test/mutation-equivalent.md', 'utf8');
const missing = left.filter(
  (l) => !listed.includes(`\`${l.key.split(' ')[0] ?? ''}\` | ${l.key.split(' ')[1] ?? ''} |`),
);
for (const l of missing) console.log(`not explained in test/mutation-equivalent.md: ${l.key}`);
process.exit(missing.length > 0 ? 1 : 0);

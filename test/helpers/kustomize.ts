/** `kustomize build DIR` with the kustomize that `npm test`'s pretest step made sure of (test/setup/tools.ts). */
import { execFileSync } from 'node:child_process';
import { kustomizeCommand } from '../setup/tools.ts';

export function kustomizeBuild(dir: string): string {
  const cmd = kustomizeCommand();
  if (!cmd)
    throw new Error(
      'no kustomize: run the tests with `npm test` (its pretest step fetches one) or put kustomize 5.x on PATH',
    );
  return execFileSync(cmd, ['build', dir], { encoding: 'utf8' });
}

/**
 * Type-checking a worker stays fast (issue 40): a project of two capabilities and a workflow
 * (test/fixtures/fastTypes) costs at most 100,000 type instantiations beyond what its imports alone
 * cost. One `defineCapability` once cost ~650,000, seconds of `tsc` per file. Counts, not timings, are
 * asserted: they are the same on every machine.
 */
import { execFile } from 'node:child_process';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { expect, it } from 'vitest';

const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
const fixture = fileURLToPath(new URL('./fixtures/fastTypes/', import.meta.url));

interface Diagnostics {
  instantiations: number;
  checkTime: string;
}

/** `tsc --extendedDiagnostics` on a project: it must compile; its instantiation count and check time. */
async function check(project: string): Promise<Diagnostics> {
  const { stdout } = await promisify(execFile)(
    process.execPath,
    [tsc, '--noEmit', '--extendedDiagnostics', '-p', `${fixture}${project}`],
    { maxBuffer: 16 * 1024 * 1024 },
  ).catch((error: { stdout?: string }) => {
    throw new Error(`the fixture does not compile:\n${error.stdout ?? String(error)}`);
  });
  const instantiations = /^Instantiations:\s+(\d+)$/m.exec(stdout)?.[1];
  const checkTime = /^Check time:\s+(\S+)$/m.exec(stdout)?.[1];
  if (!instantiations || !checkTime) throw new Error(`no diagnostics in tsc's output:\n${stdout}`);
  return { instantiations: Number(instantiations), checkTime };
}

it('a two-capability worker and its workflow type-check in at most 100,000 instantiations', async () => {
  const baseline = await check('tsconfig.baseline.json');
  const project = await check('tsconfig.json');
  const own = project.instantiations - baseline.instantiations;
  console.log(
    `fastTypes fixture: ${own} instantiations of its own (${project.instantiations} in all, check time ${project.checkTime}; imports alone ${baseline.instantiations}, ${baseline.checkTime})`,
  );
  expect(own).toBeLessThanOrEqual(100_000);
}, 120_000);

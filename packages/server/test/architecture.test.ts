/**
 * The architecture's fitness rules (.dependency-cruiser.cjs, docs/architecture.md) hold on the real tree,
 * and each rule catches the violation it names: every fixture under test/fitness/fixtures/<rule> breaks
 * exactly that rule, and `allowed` makes each permitted kind of import once.
 */
import { execFile } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../../../', import.meta.url));
const config = join(root, '.dependency-cruiser.cjs');
const fixtures = join(root, 'test/fitness/fixtures');
const run = promisify(execFile);

interface Violation {
  rule: { name: string };
  from: string;
  to: string;
}

/** Runs the checker as CI does (the CLI, with the project's rules) in `cwd`; returns its violations. */
async function cruise(
  cwd: string,
  target = 'packages',
): Promise<{ exitCode: number; violations: Violation[] }> {
  const cli = join(root, 'node_modules/.bin/depcruise');
  const args = [target, '--config', config, '--output-type', 'json'];
  const result = await run(cli, args, { cwd, maxBuffer: 64 * 1024 * 1024 }).then(
    ({ stdout }) => ({ exitCode: 0, stdout }),
    (error: { code: number; stdout: string }) => ({ exitCode: error.code, stdout: error.stdout }),
  );
  return { exitCode: result.exitCode, violations: JSON.parse(result.stdout).summary.violations };
}

const ruleFixtures = readdirSync(fixtures).filter((name) => name !== 'allowed');

describe('dependency rules', () => {
  it('hold on the repository', async () => {
    const { exitCode, violations } = await cruise(root);
    expect(violations.map((v) => `${v.rule.name}: ${v.from} → ${v.to}`)).toEqual([]);
    expect(exitCode).toBe(0);
  });

  it('allow the kernel, ports, pure domain modules and the coordinator across contexts', async () => {
    const { exitCode, violations } = await cruise(join(fixtures, 'allowed'));
    expect(violations).toEqual([]);
    expect(exitCode).toBe(0);
  });

  it('cover every rule of the configuration with a fixture', async () => {
    const { forbidden } = (await import(config)).default as { forbidden: { name: string }[] };
    expect(ruleFixtures.sort()).toEqual(forbidden.map((rule) => rule.name).sort());
  });

  it.each(ruleFixtures)('fail the check on a tree that breaks %s', async (rule) => {
    const { exitCode, violations } = await cruise(join(fixtures, rule));
    expect(exitCode).not.toBe(0);
    expect(new Set(violations.map((v) => v.rule.name))).toEqual(new Set([rule]));
  });
});

describe('source files', () => {
  const sourceFiles = (dir: string): string[] =>
    readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
      const path = join(dir, entry.name);
      if (entry.isDirectory())
        return entry.name === 'node_modules' || entry.name === 'dist' ? [] : sourceFiles(path);
      return /\.(ts|tsx)$/.test(entry.name) ? [path] : [];
    });

  it('are at most 500 lines each, so one person can review one in a sitting', () => {
    const packages = join(root, 'packages');
    const long = readdirSync(packages)
      .flatMap((name) => sourceFiles(join(packages, name, 'src')))
      .map((path) => ({
        path: path.slice(root.length),
        lines: readFileSync(path, 'utf8').split('\n').length - 1,
      }))
      .filter((file) => file.lines > 500);
    expect(long).toEqual([]);
  });
});

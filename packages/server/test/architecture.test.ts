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

/** One entry of the checker's report: `error <rule>: <from> → <to>` (a cycle goes on over more lines). */
interface Violation {
  rule: string;
  from: string;
  to: string;
}

/**
 * Runs the checker exactly as CI does (`npm run deps`: the CLI with the project's rules and its default
 * reporter, whose exit code fails the build) in `cwd`; returns the exit code and the reported violations.
 */
async function cruise(cwd: string): Promise<{ exitCode: number; violations: Violation[] }> {
  const cli = join(root, 'node_modules/.bin/depcruise');
  const result = await run(cli, ['packages', '--config', config], {
    cwd,
    maxBuffer: 64 * 1024 * 1024,
    // Plain text, whatever the test runner's terminal.
    env: { ...process.env, NO_COLOR: '1', FORCE_COLOR: '0' },
  }).then(
    ({ stdout }) => ({ exitCode: 0, stdout }),
    (error: { code: number; stdout: string }) => ({ exitCode: error.code, stdout: error.stdout }),
  );
  const violations = [...result.stdout.matchAll(/^\s*error (\S+): (\S+) →\s+(\S+)/gm)].map(
    ([, rule, from, to]) => ({
      rule: rule!,
      from: from!,
      to: to!,
    }),
  );
  return { exitCode: result.exitCode, violations };
}

const ruleFixtures = readdirSync(fixtures).filter((name) => name !== 'allowed');

describe('dependency rules', () => {
  it('hold on the repository', async () => {
    const { exitCode, violations } = await cruise(root);
    expect(violations.map((v) => `${v.rule}: ${v.from} → ${v.to}`)).toEqual([]);
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
    expect(new Set(violations.map((v) => v.rule))).toEqual(new Set([rule]));
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

  it("open no transaction with the driver's sql.begin: transaction() fails cleanly when a connection closes", () => {
    // The driver's own begin hands a statement issued after a close to a dropped socket: an uncaught
    // TypeError, which ends the process. Migrations run alone at start and keep it.
    const server = join(root, 'packages', 'server', 'src');
    const begins = sourceFiles(server)
      .filter((path) => !path.endsWith('migrate.ts'))
      .filter((path) => /\bsql\.begin\(/.test(readFileSync(path, 'utf8')))
      .map((path) => path.slice(root.length));
    expect(begins).toEqual([]);
  });
});

import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { defineConfig } from 'vitest/config';

/**
 * The workspace's packages from their TypeScript sources — each export's `@tdp/source` condition in its
 * package.json — so the suite never runs a stale (or missing) dist/. Aliases, not resolve conditions:
 * they hold in every vite environment vitest uses, its global setup's included.
 */
function sourceAliases(): { find: RegExp; replacement: string }[] {
  const packages = new URL('./packages/', import.meta.url).pathname;
  return readdirSync(packages).flatMap((name) => {
    const manifest = JSON.parse(readFileSync(join(packages, name, 'package.json'), 'utf8')) as {
      name: string;
      exports?: Record<string, string | Record<string, string>>;
    };
    return Object.entries(manifest.exports ?? {}).flatMap(([subpath, target]) => {
      const source = typeof target === 'object' ? target['@tdp/source'] : undefined;
      if (!source) return [];
      const specifier = `${manifest.name}${subpath === '.' ? '' : subpath.slice(1)}`;
      return [
        {
          find: new RegExp(`^${specifier.replaceAll('/', '\\/')}$`),
          replacement: join(packages, name, source),
        },
      ];
    });
  });
}

export default defineConfig({
  resolve: { alias: sourceAliases() },
  test: {
    include: ['packages/*/test/**/*.test.ts'],
    globalSetup: ['test/globalSetup.ts'],
    testTimeout: 30_000,
    hookTimeout: 90_000,
    pool: 'forks',
    // Two files at once, also on a 2-core machine (vitest's default there is one): most files wait on
    // PostgreSQL, servers and child processes rather than compute, and one at a time left the suite at
    // 13 minutes of a 30-minute CI. TDP_TEST_WORKERS overrides it.
    maxWorkers: Number(process.env.TDP_TEST_WORKERS ?? 2),
    // A worker keeps its loaded modules from one file to the next: importing the server's sources again
    // for each of 140 files took 300 s of the suite's CPU (22 s this way; the suite 1,015 s -> 760 s on
    // 2 cores). Safe because nothing in TDP holds global state and no test mocks modules, stubs globals
    // or fakes timers; TDP_TEST_ISOLATE=1 gives each file fresh modules again.
    isolate: process.env.TDP_TEST_ISOLATE === '1',
  },
});

import { defaultServerConditions } from 'vite';
import { defineConfig } from 'vitest/config';

export default defineConfig({
  // The workspace's packages from their TypeScript sources (the `@tdp/source` condition of their
  // package.json exports), so the suite never runs a stale dist/.
  resolve: { conditions: ['@tdp/source', ...defaultServerConditions] },
  ssr: { resolve: { conditions: ['@tdp/source', ...defaultServerConditions] } },
  test: {
    include: ['packages/*/test/**/*.test.ts'],
    globalSetup: ['test/globalSetup.ts'],
    testTimeout: 30_000,
    hookTimeout: 90_000,
    pool: 'forks',
  },
});

import { defaultClientConditions, defineConfig } from 'vite';

// Served by the TDP server under /dashboard/ (see dashboardRoutes.ts).
export default defineConfig({
  base: '/dashboard/',
  root: new URL('.', import.meta.url).pathname,
  // The workspace's packages from their TypeScript sources (see their package.json exports).
  resolve: { conditions: ['@tdp/source', ...defaultClientConditions] },
  build: { outDir: 'dist', emptyOutDir: true, sourcemap: true },
  oxc: { jsx: { runtime: 'automatic', importSource: 'react' } },
});

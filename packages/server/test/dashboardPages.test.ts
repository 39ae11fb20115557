/**
 * Where the dashboard's pages are served from: TDP_DASHBOARD_DIR when set (and it must hold a build),
 * else the installed @tdp/dashboard's dist/.
 */
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { dashboardPages } from '../src/features/dashboard/dashboardPages.ts';
import { configFromEnv } from '../src/main.ts';

describe('the dashboard pages directory', () => {
  it('is the configured folder when it holds a build', async () => {
    const folder = await mkdtemp(join(tmpdir(), 'tdp-pages-'));
    await writeFile(join(folder, 'index.html'), '<!doctype html>');
    await expect(dashboardPages(folder)).resolves.toBe(folder);
  });

  it('stops the start when the configured folder holds none', async () => {
    const folder = await mkdtemp(join(tmpdir(), 'tdp-pages-'));
    await expect(dashboardPages(folder)).rejects.toThrow(/TDP_DASHBOARD_DIR .*\(no index\.html\)/);
  });

  it('comes from TDP_DASHBOARD_DIR, and is unset without it', () => {
    const env = {
      DATABASE_URL: 'postgres://x',
      TDP_ADMIN_TOKEN: 'a-long-enough-admin-token',
      TDP_SECRET_KEYS: 'k1:MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=',
    };
    expect(configFromEnv({ ...env, TDP_DASHBOARD_DIR: '/srv/pages' }).dashboardDirectory).toBe('/srv/pages');
    expect(configFromEnv(env).dashboardDirectory).toBeNull();
  });
});

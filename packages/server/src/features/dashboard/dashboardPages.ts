import { access } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

/**
 * The dashboard's built pages: the given directory, which must hold them (a wrong TDP_DASHBOARD_DIR
 * stops the start rather than serving no dashboard), or else the installed @tdp/dashboard's dist/ when
 * it is there.
 */
export async function dashboardPages(configured: string | null = null): Promise<string | null> {
  if (configured) {
    await access(join(configured, 'index.html')).catch(() => {
      throw new Error(`TDP_DASHBOARD_DIR ${configured} holds no built dashboard (no index.html)`);
    });
    return configured;
  }
  let directory: string;
  try {
    const manifest = createRequire(import.meta.url).resolve('@tdp/dashboard/package.json');
    directory = join(dirname(manifest), 'dist');
  } catch {
    return null;
  }
  return access(join(directory, 'index.html')).then(
    () => directory,
    () => null,
  );
}

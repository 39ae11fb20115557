import { access } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

/** The dashboard's built pages (@tdp/dashboard's dist/), when they are there. */
export async function dashboardPages(): Promise<string | null> {
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

import { access } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The dashboard's built pages (packages/dashboard/dist), when they are there. */
export async function dashboardPages(): Promise<string | null> {
  const directory = fileURLToPath(new URL('../../../dashboard/dist/', import.meta.url));
  return access(join(directory, 'index.html')).then(
    () => directory,
    () => null,
  );
}

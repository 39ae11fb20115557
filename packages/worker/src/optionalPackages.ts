/**
 * Packages only some settings need (gRPC reporting, tracing) are optional peer dependencies of
 * `@tdp/worker`: `npm install @tdp/worker` leaves them out, and they are imported when a setting asks
 * for them. Missing, the setting fails the start with the command that installs them.
 */
import { WorkerConfigError } from './configError.ts';

export async function importOptional<T>(
  load: () => Promise<T>,
  packages: string[],
  setting: string,
): Promise<T> {
  try {
    return await load();
  } catch (error) {
    const { code, message } = error as { code?: string; message?: string };
    const missing = packages.filter((name) => message?.includes(`'${name}'`));
    if (code === 'ERR_MODULE_NOT_FOUND' && missing.length > 0)
      throw new WorkerConfigError(
        `${setting} needs ${missing.join(' and ')}, which is not installed: npm install ${packages.join(' ')}`,
      );
    throw error;
  }
}

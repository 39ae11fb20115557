/**
 * The worker's own files are its user's alone: the local database holds execution tokens and every
 * tenant's inputs, the work directories hold their files. Each is created with an explicit mode (0600 for
 * a file, 0700 for a directory) and tightened when it exists from before, whatever the umask says.
 */
import { chmodSync, closeSync, existsSync, openSync } from 'node:fs';
import { chmod, lstat, mkdir } from 'node:fs/promises';

export const privateFileMode = 0o600;
export const privateDirectoryMode = 0o700;

/**
 * `path` exists as a file only its owner can read and write. SQLite gives its `-wal` and `-shm` files the
 * main file's mode when it creates them; those that exist from before are tightened here too.
 */
export function privateDatabaseFile(path: string): void {
  closeSync(openSync(path, 'a', privateFileMode));
  for (const file of [path, `${path}-wal`, `${path}-shm`, `${path}-journal`])
    if (existsSync(file)) chmodSync(file, privateFileMode);
}

/**
 * `path` exists as a directory only its owner can enter. An existing one must be a real directory of
 * this user (not a link someone else left in a shared folder such as /tmp).
 */
export async function privateDirectory(path: string): Promise<void> {
  await mkdir(path, { recursive: true, mode: privateDirectoryMode });
  const found = await lstat(path);
  const uid = process.getuid?.();
  if (!found.isDirectory() || (uid !== undefined && found.uid !== uid))
    throw new Error(`${path} is not a directory of this user`);
  await chmod(path, privateDirectoryMode);
}

/**
 * The worker's own files are its user's alone: the local database holds execution tokens and every
 * tenant's inputs, the work directories hold their files. Each is created with an explicit mode (0600 for
 * a file, 0700 for a directory) and tightened when it exists from before, whatever the umask says.
 */
import { chmodSync, closeSync, existsSync, lstatSync, mkdirSync, openSync } from 'node:fs';

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
 * this user (not a link someone else left in a shared folder such as /tmp). Synchronous, as an attempt
 * makes its folder from the context's `workDirectory` getter.
 */
export function privateDirectory(path: string): void {
  mkdirSync(path, { recursive: true, mode: privateDirectoryMode });
  const found = lstatSync(path);
  const uid = process.getuid?.();
  if (!found.isDirectory() || (uid !== undefined && found.uid !== uid))
    throw new Error(`${path} is not a directory of this user`);
  chmodSync(path, privateDirectoryMode);
}

/**
 * An attempt's folder, made (0700) the first time the capability asks for its path. Most capabilities
 * never touch a file, and making and removing a folder for each of their attempts was a tenth of the
 * worker's main thread at 150 attempts a second.
 */
export class WorkDirectory {
  #made = false;

  constructor(readonly path: string) {}

  /** Whether this run of the attempt made (or took over) the folder. */
  get made(): boolean {
    return this.#made;
  }

  /** The folder's path, made first if it is not yet. */
  use(): string {
    if (!this.#made) {
      privateDirectory(this.path);
      this.#made = true;
    }
    return this.path;
  }
}

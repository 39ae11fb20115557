import { randomBytes } from 'node:crypto';
import { chmod, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { DemoCredentials } from '@tdp/demo-app';

/** What `tdp dev` remembers between runs in $TDP_HOME/credentials.json (mode 0600). */
export interface DevCredentials {
  adminToken: string;
  /** TDP_SECRET_KEYS format: the keyring that seals application secrets in this database. */
  secretKeys: string;
  apiKey?: string;
  tenantId?: string;
  applicationId?: string;
  callbackSecret?: string;
  /** The dev worker's key (tdpw_…). */
  workerKey?: string;
  /** The embedded PostgreSQL's superuser password (every connection to it needs it). */
  postgresPassword?: string;
  /** The development admin's (dev@localhost) password for the dashboard's sign-in. */
  operatorPassword?: string;
  /** The demo business application's own TDP application and provider token. */
  demo?: DemoCredentials;
}

export function credentialsPath(home: string): string {
  return join(home, 'credentials.json');
}

export async function loadCredentials(home: string): Promise<DevCredentials | null> {
  try {
    return JSON.parse(await readFile(credentialsPath(home), 'utf8')) as DevCredentials;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw new Error(`cannot read ${credentialsPath(home)}: ${(error as Error).message}`);
  }
}

export async function saveCredentials(home: string, credentials: DevCredentials): Promise<void> {
  const path = credentialsPath(home);
  await writeFile(path, `${JSON.stringify(credentials, null, 2)}\n`, { mode: 0o600 });
  // The mode above is for a new file, less the umask: a file from before is made 0600 too.
  await chmod(path, 0o600);
}

export function newAdminToken(): string {
  return `tdpadm_${randomBytes(24).toString('base64url')}`;
}

/**
 * The embedded PostgreSQL can be stopped the way a crash stops it (the chaos suite's `pg-restart`) and
 * started again on the same data: what was committed is there, after crash recovery. It trusts no
 * connection (issue 38): every one needs the superuser's password, and a cluster made before that rule
 * (trust, no password) gets the password on its next start, its data kept.
 */
import { chmod, chown, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import postgres from 'postgres';
import { afterAll, expect, it } from 'vitest';
import { type EmbeddedPostgres, freePort, startEmbeddedPostgres } from '../src/embeddedPostgres.ts';

let home = '';
const homes: string[] = [];

afterAll(async () => {
  for (const folder of [home, ...homes]) if (folder) await rm(folder, { recursive: true, force: true });
});

/** A folder for one cluster, reachable by the postgres user when the tests run as root. */
async function clusterHome(): Promise<string> {
  const folder = await mkdtemp(join(tmpdir(), 'tdp-pg-password-'));
  await chmod(folder, 0o755);
  homes.push(folder);
  return folder;
}

/** Connects with `password` (none: none at all) and answers `SELECT 1`, or says why it could not. */
async function connect(postgresServer: EmbeddedPostgres, password: string | null): Promise<string> {
  const url = new URL(postgresServer.adminUrl);
  url.password = password ?? '';
  const sql = postgres(url.toString(), { max: 1, onnotice: () => {}, connect_timeout: 10 });
  try {
    const [row] = await sql`SELECT 1 AS one`;
    return row?.one === 1 ? 'connected' : 'no answer';
  } catch (error) {
    return `refused: ${(error as { code?: string }).code ?? (error as Error).message}`;
  } finally {
    await sql.end({ timeout: 1 });
  }
}

it('an immediate stop skips the shutdown checkpoint; the next start recovers the committed data', async () => {
  home = await mkdtemp(join(tmpdir(), 'tdp-pg-immediate-'));
  await chmod(home, 0o755);
  const options = { dataDirectory: join(home, 'postgres'), port: await freePort() };
  const first = await startEmbeddedPostgres(options);
  const sql = postgres(first.adminUrl, { max: 1, onnotice: () => {} });
  await sql`CREATE TABLE kept (n integer)`;
  await sql`INSERT INTO kept VALUES (42)`;
  await sql.end();
  await first.stop('immediate');

  let log = '';
  const second = await startEmbeddedPostgres({ ...options, log: (line) => (log += line) });
  try {
    // A fast shutdown writes a checkpoint and the next start says "shut down"; only a crash needs recovery.
    expect(log).toMatch(/was interrupted|not properly shut down/);
    const again = postgres(second.adminUrl, { max: 1, onnotice: () => {} });
    expect(await again`SELECT n FROM kept`).toEqual([{ n: 42 }]);
    await again.end();
  } finally {
    await second.stop();
  }
});

it('asks every connection for the password: none and a wrong one are refused', async () => {
  const folder = await clusterHome();
  const password = 'the-right-one';
  const server = await startEmbeddedPostgres({
    dataDirectory: join(folder, 'postgres'),
    port: await freePort(),
    password,
  });
  try {
    expect(new URL(server.adminUrl).password).toBe(password);
    expect(await connect(server, password)).toBe('connected');
    expect(await connect(server, null)).toMatch(/^refused/);
    expect(await connect(server, 'a-wrong-one')).toBe('refused: 28P01');
    const hba = await readFile(join(server.dataDirectory, 'pg_hba.conf'), 'utf8');
    expect(hba).not.toMatch(/^[^#\n]*\btrust\b/m);
    expect(hba).toMatch(/^local\s+all\s+all\s+scram-sha-256$/m);
  } finally {
    await server.stop();
  }
});

it('a cluster from before the password (trust, none set) gets it on its next start, with its data', async () => {
  const folder = await clusterHome();
  const options = { dataDirectory: join(folder, 'postgres'), port: await freePort() };
  // The cluster as `tdp dev` made it before: its superuser without a password, pg_hba trusting all.
  const before = await startEmbeddedPostgres({ ...options, password: 'set-to-be-removed' });
  const sql = postgres(before.adminUrl, { max: 1, onnotice: () => {} });
  await sql`CREATE TABLE kept (n integer)`;
  await sql`INSERT INTO kept VALUES (7)`;
  await sql`ALTER ROLE postgres WITH PASSWORD NULL`;
  await sql.end();
  await before.stop();
  const hba = join(before.dataDirectory, 'pg_hba.conf');
  const owner = await stat(before.dataDirectory);
  await writeFile(
    hba,
    ['local all all trust', 'host all all 127.0.0.1/32 trust', 'host all all ::1/128 trust', ''].join('\n'),
  );
  await chown(hba, owner.uid, owner.gid);

  const after = await startEmbeddedPostgres({ ...options, password: 'the-new-one' });
  try {
    expect(await connect(after, null)).toMatch(/^refused/);
    expect(await connect(after, 'set-to-be-removed')).toBe('refused: 28P01');
    const again = postgres(after.adminUrl, { max: 1, onnotice: () => {} });
    expect(await again`SELECT n FROM kept`).toEqual([{ n: 7 }]);
    // Stored as a SCRAM verifier, not as the password itself.
    const [role] = await again`SELECT rolpassword FROM pg_authid WHERE rolname = 'postgres'`;
    expect(role?.rolpassword).toMatch(/^SCRAM-SHA-256\$/);
    await again.end();
  } finally {
    await after.stop();
  }
});

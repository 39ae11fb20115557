/**
 * The embedded PostgreSQL can be stopped the way a crash stops it (the chaos suite's `pg-restart`) and
 * started again on the same data: what was committed is there, after crash recovery.
 */
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import postgres from 'postgres';
import { afterAll, expect, it } from 'vitest';
import { freePort, startEmbeddedPostgres } from '../src/embeddedPostgres.ts';

let home = '';

afterAll(async () => {
  if (home) await rm(home, { recursive: true, force: true });
});

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

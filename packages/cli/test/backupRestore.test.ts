/**
 * `tdp backup` and `tdp restore` as real processes against the installed PostgreSQL (scripts/services.sh):
 * a primary archiving its WAL, a base backup, rows written in batches around recorded times, and
 * point-in-time restores into new clusters whose counts must be those of the moment chosen. Also the
 * refusals: no WAL archive, a time before the backup, a time before a migration this TDP needs.
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chmod, chown, mkdir, mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { connectDatabase } from '@tdp/server';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { installedPostgres } from '../../../test/postgresPair.ts';
import { loadMigrations, migrate } from '../../server/src/adapters/outbound/postgres/migrate.ts';
import {
  type EmbeddedPostgres,
  freePort,
  newPostgresPassword,
  postgresUser,
  startEmbeddedPostgres,
} from '../src/embeddedPostgres.ts';
import { checkRestored, type RestoreCheck } from '../src/restoreCheck.ts';

const root = new URL('../../../', import.meta.url).pathname;
const run = promisify(execFile);
const bin = installedPostgres();
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function tdp(args: string[], databaseUrl: string) {
  try {
    const { stdout, stderr } = await run(
      process.execPath,
      ['--conditions=@tdp/source', '--import', 'tsx', 'packages/cli/src/main.ts', ...args],
      { cwd: root, env: { PATH: process.env.PATH ?? '', DATABASE_URL: databaseUrl }, timeout: 120_000 },
    );
    return { code: 0, stdout, stderr };
  } catch (error) {
    const failed = error as { code: number; stdout: string; stderr: string };
    return { code: failed.code, stdout: failed.stdout, stderr: failed.stderr };
  }
}

// Without the installed PostgreSQL a developer's run skips these; CI fails them (beforeAll throws).
describe.skipIf(!bin && !process.env.CI)('tdp backup and tdp restore (point in time)', () => {
  let home: string;
  let archive: string;
  let password: string;
  let port: number;
  let primary: EmbeddedPostgres;
  let databaseUrl: string;
  const start = (settings: Record<string, string>) =>
    startEmbeddedPostgres({
      dataDirectory: join(home, 'primary'),
      port,
      password,
      binaries: { initdb: join(bin!, 'initdb'), postgres: join(bin!, 'postgres') },
      settings: { wal_level: 'replica', max_wal_senders: '5', ...settings },
    });

  beforeAll(async () => {
    if (!bin) throw new Error('no installed PostgreSQL with pg_basebackup: run scripts/services.sh');
    home = await mkdtemp(join(tmpdir(), 'tdp-backup-'));
    await chmod(home, 0o755); // as root, PostgreSQL runs as `postgres`, which must reach the folder
    archive = join(home, 'wal-archive');
    await mkdir(archive);
    const runAs = postgresUser();
    if (runAs) await chown(archive, runAs.uid, runAs.gid);
    password = newPostgresPassword();
    port = await freePort();
    primary = await start({});
    databaseUrl = primary.urlFor('tdp_backup');
  }, 120_000);

  afterAll(async () => {
    await primary?.stop('immediate');
    if (home) await rm(home, { recursive: true, force: true });
  });

  it('refuses a backup of a server that does not archive its WAL, saying how to turn it on', async () => {
    const refused = await tdp(
      ['backup', '--to', join(home, 'backups'), '--archive', archive],
      primary.adminUrl,
    );
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(/^tdp: WAL_ARCHIVE_MISSING: the server does not archive its WAL/);
    expect(refused.stderr).toContain('archive_mode = on');
    expect(refused.stderr).toContain(`archive_command = 'test ! -f ${archive}/%f && cp %p ${archive}/%f'`);
    expect(existsSync(join(home, 'backups'))).toBe(false);
    expect(refused.stderr).not.toContain(password);
  });

  it('restores to a chosen time with the counts of that moment, and refuses times it cannot restore to', async () => {
    await primary.stop();
    primary = await start({
      archive_mode: 'on',
      archive_command: `test ! -f ${archive}/%f && cp %p ${archive}/%f`,
    });
    const admin = connectDatabase({ url: primary.adminUrl, maxConnections: 1 });
    await admin.unsafe('CREATE DATABASE tdp_backup');
    await admin.end();
    const sql = connectDatabase({ url: databaseUrl, maxConnections: 1 });
    try {
      // The backup is of the schema before the newest migration; that one is applied after it.
      const migrations = await loadMigrations();
      const newest = migrations.at(-1)!;
      await migrate(sql, migrations.slice(0, -1));
      const batch = async (tenants: number, published: number) => {
        for (let i = 0; i < tenants; i++) {
          const [tenant] = await sql<{ id: string }[]>`
            INSERT INTO tenant (id, name, created_at) VALUES (gen_random_uuid(), gen_random_uuid()::text, now())
            RETURNING id`;
          const [application] = await sql<{ id: string }[]>`
            INSERT INTO application (id, tenant_id, name, callback_secret_sealed, created_at, updated_at)
            VALUES (gen_random_uuid(), ${tenant!.id}, 'app', 'sealed', now(), now()) RETURNING id`;
          for (let e = 0; e < 3; e++)
            await sql`
              INSERT INTO outbox_event (id, tenant_id, application_id, aggregate_id, event_type, payload,
                                        status, available_at, created_at, published_at)
              VALUES (gen_random_uuid(), ${tenant!.id}, ${application!.id}, gen_random_uuid(), 'task.created',
                      '{}', ${e < published ? 'PUBLISHED' : 'PENDING'}, now(), now(),
                      ${e < published ? new Date() : null})`;
        }
      };
      // Every WAL segment written so far in the archive (a restore reads only archived segments).
      const archived = async () => {
        const [row] = await sql<{ file: string }[]>`SELECT pg_walfile_name(pg_switch_wal()) AS file`;
        for (let waited = 0; !existsSync(join(archive, row!.file)); waited += 100) {
          if (waited > 30_000) throw new Error(`${row!.file} never reached the archive`);
          await sleep(100);
        }
      };
      const serverNow = async () =>
        ((await sql<{ now: Date }[]>`SELECT clock_timestamp() AS now`)[0]!.now as Date).toISOString();

      await batch(2, 1);
      const backups = join(home, 'backups');
      const backedUp = await tdp(['backup', '--to', backups, '--archive', archive], databaseUrl);
      expect(backedUp.stderr + backedUp.stdout).not.toContain(password);
      expect(backedUp.code, backedUp.stderr).toBe(0);
      const [name] = (await readdir(backups)).filter((entry) => !entry.endsWith('.json'));
      const backup = join(backups, name!);
      const manifest = JSON.parse(await readFile(`${backup}.json`, 'utf8'));
      expect(manifest).toMatchObject({ schemaVersion: newest.version - 1, database: 'tdp_backup', archive });

      // Before the backup ended: nothing to restore to.
      const early = await tdp(
        [
          'restore',
          '--backup',
          backup,
          '--to',
          new Date(Date.parse(manifest.startedAt) - 1000).toISOString(),
          '--pgdata',
          join(home, 'early'),
        ],
        databaseUrl,
      );
      expect(early.code).toBe(2);
      expect(early.stderr).toMatch(/^tdp: RESTORE_BEFORE_BACKUP: .* is before this backup ended/);
      expect(existsSync(join(home, 'early'))).toBe(false);

      await sleep(300);
      const beforeMigration = await serverNow();
      await sleep(300);
      await migrate(sql, migrations);
      await batch(3, 2);
      await archived();
      await sleep(300);
      const chosen = await serverNow();
      const atChosen = await checkRestored(sql);
      await sleep(300);
      await batch(4, 3);
      await archived();
      const atEnd = await checkRestored(sql);
      expect(atEnd.tables.tenant).toBe(9);

      // At that time this TDP's newest migration was not applied yet: refused after recovery, nothing kept.
      const unmigrated = await tdp(
        ['restore', '--backup', backup, '--to', beforeMigration, '--pgdata', join(home, 'unmigrated')],
        databaseUrl,
      );
      expect(unmigrated.code, unmigrated.stderr).toBe(2);
      expect(unmigrated.stderr).toMatch(/^tdp: RESTORE_BEFORE_MIGRATIONS: at /m);
      expect(unmigrated.stderr).toContain(
        `schema version ${newest.version - 1}, and this TDP needs ${newest.version} (${newest.name})`,
      );
      expect(existsSync(join(home, 'unmigrated'))).toBe(false);

      const restored = await tdp(
        ['restore', '--backup', backup, '--to', chosen, '--pgdata', join(home, 'restored'), '--json'],
        databaseUrl,
      );
      expect(restored.code, restored.stderr).toBe(0);
      const report = JSON.parse(restored.stdout) as RestoreCheck & { restoredTo: string; url: string };
      expect(report.restoredTo).toBe(chosen);
      expect(report.url).not.toContain(password);
      expect(report.schema).toMatchObject({ version: newest.version, name: newest.name });
      expect(Date.parse(report.lastTransactionAt!)).toBeLessThanOrEqual(Date.parse(chosen));
      // The counts of the moment chosen, table by table, and the outboxes where they stood.
      expect(report.tables).toEqual(atChosen.tables);
      expect(report.tables.tenant).toBe(5);
      expect(report.tables.outbox_event).toBe(15);
      expect(report.outboxes).toEqual(atChosen.outboxes);
      expect(report.outboxes.find((o) => o.table === 'outbox_event')).toMatchObject({
        waiting: 7,
        published: 8,
      });
    } finally {
      await sql.end();
    }
  }, 240_000);
});

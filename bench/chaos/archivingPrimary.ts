/**
 * The restore drill's PostgreSQL (bench/restoreDrill.ts): the installed PostgreSQL as a primary that
 * archives its WAL into a folder, with commit timestamps on (to check that a recorded moment is a
 * consistent cut), and the `tdp backup` / `tdp restore` CLIs run as an operator runs them.
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chmod, chown, mkdir, mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import {
  type EmbeddedPostgres,
  freePort,
  newPostgresPassword,
  postgresUser,
  startEmbeddedPostgres,
} from '../../packages/cli/src/embeddedPostgres.ts';
import type { RestoreCheck } from '../../packages/cli/src/restoreCheck.ts';
import type { connectDatabase } from '../../packages/server/src/main.ts';
import { installedPostgres } from '../../test/postgresPair.ts';

const run = promisify(execFile);
const cli = ['--conditions=@tdp/source', '--import', 'tsx', 'packages/cli/src/main.ts'];
type Sql = ReturnType<typeof connectDatabase>;

export interface ArchivingPrimary {
  home: string;
  archive: string;
  password: string;
  server: EmbeddedPostgres;
  /** A database's URL on this primary. */
  urlFor(database: string): string;
}

export async function startArchivingPrimary(): Promise<ArchivingPrimary> {
  const bin = installedPostgres();
  if (!bin) throw new Error('no installed PostgreSQL with pg_basebackup: run scripts/services.sh');
  const home = await mkdtemp(join(tmpdir(), 'tdp-restore-drill-'));
  await chmod(home, 0o755); // as root, PostgreSQL runs as `postgres`, which must reach the folder
  const archive = join(home, 'wal-archive');
  await mkdir(archive);
  const runAs = postgresUser();
  if (runAs) await chown(archive, runAs.uid, runAs.gid);
  const password = newPostgresPassword();
  const port = await freePort();
  const server = await startEmbeddedPostgres({
    dataDirectory: join(home, 'primary'),
    port,
    password,
    binaries: { initdb: join(bin, 'initdb'), postgres: join(bin, 'postgres') },
    settings: {
      wal_level: 'replica',
      max_wal_senders: '5',
      archive_mode: 'on',
      archive_command: `test ! -f ${archive}/%f && cp %p ${archive}/%f`,
      track_commit_timestamp: 'on',
    },
  });
  return {
    home,
    archive,
    password,
    server,
    urlFor: (database) => `postgres://postgres:${password}@127.0.0.1:${port}/${database}`,
  };
}

/** `tdp <args>` with only PATH and DATABASE_URL, as the backup test runs it; its exit code and output. */
export async function tdpCli(args: string[], databaseUrl: string) {
  try {
    const { stdout, stderr } = await run(process.execPath, [...cli, ...args], {
      env: { PATH: process.env.PATH ?? '', DATABASE_URL: databaseUrl },
      timeout: 600_000,
    });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const failed = error as { code: number; stdout: string; stderr: string };
    return { code: failed.code, stdout: failed.stdout, stderr: failed.stderr };
  }
}

/** Every WAL segment written so far in the archive (a restore reads only archived segments). */
export async function archiveEverything(sql: Sql, archive: string): Promise<void> {
  const [row] = await sql<{ file: string }[]>`SELECT pg_walfile_name(pg_switch_wal()) AS file`;
  for (let waited = 0; !existsSync(join(archive, row!.file)); waited += 100) {
    if (waited > 60_000) throw new Error(`${row!.file} never reached the archive`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

export interface Moment<T> {
  at: string;
  check: RestoreCheck;
  extra: T;
  /** Attempts thrown away because a commit timestamped before the moment was not in its snapshot. */
  retries: number;
}

/**
 * A moment T and what the database held at T, from one REPEATABLE READ snapshot whose first statement
 * reads the clock. A commit's timestamp is taken before it becomes visible, so a transaction committing
 * just then can be before T and outside the snapshot (a restore to T would hold it): the transactions
 * the snapshot did not see are checked with their commit timestamps, and the moment is taken again.
 */
export async function consistentMoment<T>(
  sql: Sql,
  read: (tx: Sql) => Promise<{ check: RestoreCheck; extra: T }>,
): Promise<Moment<T>> {
  for (let retries = 0; retries < 10; retries++) {
    const taken = await sql.begin('isolation level repeatable read', async (tx) => {
      const [row] = await tx<{ at: Date; snapshot: string }[]>`
        SELECT clock_timestamp() AS at, pg_current_snapshot()::text AS snapshot`;
      return { at: row!.at, snapshot: row!.snapshot, ...(await read(tx as unknown as Sql)) };
    });
    await new Promise((resolve) => setTimeout(resolve, 200)); // whatever was committing has committed
    const [race] = await sql<{ n: number }[]>`
      WITH unseen AS (
        SELECT x::text::xid AS xid FROM pg_snapshot_xip(${taken.snapshot}::pg_snapshot) x
        UNION ALL
        SELECT g::text::xid FROM generate_series(
          pg_snapshot_xmax(${taken.snapshot}::pg_snapshot)::text::bigint,
          pg_snapshot_xmax(pg_current_snapshot())::text::bigint - 1) g)
      SELECT count(*)::int AS n FROM unseen WHERE pg_xact_commit_timestamp(xid) <= ${taken.at}`;
    if (race!.n === 0) return { at: taken.at.toISOString(), check: taken.check, extra: taken.extra, retries };
  }
  throw new Error('no consistent moment in 10 tries');
}

/**
 * `tdp restore --keep-running --json`: resolves with its report once the restored cluster is up and
 * checked; `stop()` ends the CLI, which stops the cluster.
 */
export async function restoreKeepRunning(args: string[], databaseUrl: string, log: (text: string) => void) {
  const child: ChildProcess = spawn(
    process.execPath,
    [...cli, 'restore', ...args, '--json', '--keep-running'],
    {
      env: { PATH: process.env.PATH ?? '', DATABASE_URL: databaseUrl },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  child.stderr!.on('data', (chunk: Buffer) => log(chunk.toString()));
  let stdout = '';
  const report = await new Promise<RestoreCheck & { restoredTo: string; port: number }>((resolve, reject) => {
    child.stdout!.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
      try {
        resolve(JSON.parse(stdout));
      } catch {
        // not the whole report yet
      }
    });
    void exited.then((code) => reject(new Error(`tdp restore exited with ${code} before its report`)));
  });
  return {
    report,
    stop: async () => {
      if (child.exitCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
}

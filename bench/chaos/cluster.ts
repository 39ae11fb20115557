/**
 * The chaos suite's own PostgreSQL: an embedded cluster in a fixed folder under the system's temporary
 * directory, so a fault can stop it (immediate: a crash) and start it again on the same data and port.
 * Never a shared server: the faults would hit everyone else's databases. `Monitor` is the suite's own
 * connection, which reconnects after faults and is spared by them (application_name `chaos-monitor`).
 */
import { randomBytes } from 'node:crypto';
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import {
  type EmbeddedPostgres,
  freePort,
  newPostgresPassword,
  startEmbeddedPostgres,
} from '../../packages/cli/src/embeddedPostgres.ts';

export const monitorName = 'chaos-monitor';

/** Where a scenario's systems keep their databases: the suite's own cluster, or a failover pair. */
export interface Cluster {
  /** A database's URL; `multiHost`: every host of a pair, for a system that finds the primary itself. */
  urlFor(database: string, options?: { multiHost?: boolean }): string;
  createDatabase(prefix: string): Promise<string>;
  dropDatabase(name: string): Promise<void>;
  stopImmediate(): Promise<void>;
  startPostgres(): Promise<void>;
  /** The primary dies and a standby takes over (a pair's). */
  failover?(): Promise<void>;
}

export class ChaosCluster implements Cluster {
  /** Kept for the restarts: each start sets it again. */
  private readonly password = newPostgresPassword();

  private constructor(
    private readonly home: string,
    readonly port: number,
    private postgres: EmbeddedPostgres | null,
  ) {}

  static async start(): Promise<ChaosCluster> {
    const home = await mkdtemp(join(tmpdir(), 'tdp-chaos-'));
    await chmod(home, 0o755); // as root, PostgreSQL runs as `postgres`, which must reach the folder
    const cluster = new ChaosCluster(home, await freePort(), null);
    await cluster.startPostgres();
    return cluster;
  }

  urlFor(database: string): string {
    return `postgres://postgres:${this.password}@127.0.0.1:${this.port}/${database}`;
  }

  /** A fresh database for one system in one scenario. */
  async createDatabase(prefix: string): Promise<string> {
    const name = `${prefix}_${randomBytes(3).toString('hex')}`;
    await this.admin(`CREATE DATABASE ${name}`);
    return name;
  }

  async dropDatabase(name: string): Promise<void> {
    await this.admin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  }

  /** PostgreSQL's immediate shutdown: no checkpoint, every session cut; crash recovery at the next start. */
  async stopImmediate(): Promise<void> {
    await this.postgres?.stop('immediate');
    this.postgres = null;
  }

  async startPostgres(): Promise<void> {
    this.postgres = await startEmbeddedPostgres({
      dataDirectory: join(this.home, 'postgres'),
      port: this.port,
      password: this.password,
    });
  }

  async close(): Promise<void> {
    await this.postgres?.stop();
    await rm(this.home, { recursive: true, force: true });
  }

  private async admin(statement: string): Promise<void> {
    const client = new pg.Client({ connectionString: this.urlFor('postgres') });
    await client.connect();
    try {
      await client.query(statement);
    } finally {
      await client.end();
    }
  }
}

/** The suite's connection to one database: reconnects on demand; a query during a fault gives null. */
export class Monitor {
  private client: pg.Client | null = null;
  private connecting: Promise<pg.Client> | null = null;

  constructor(private readonly url: string) {}

  async query<Row>(text: string, values: unknown[] = []): Promise<Row[] | null> {
    try {
      const client = await this.connect();
      return (await client.query(text, values)).rows as Row[];
    } catch {
      this.drop();
      return null;
    }
  }

  /** Opens the connection now (before a fault that would refuse a new one). */
  async connect(): Promise<pg.Client> {
    if (this.client) return this.client;
    this.connecting ??= (async () => {
      const client = new pg.Client({
        connectionString: this.url,
        application_name: monitorName,
        connectionTimeoutMillis: 3_000,
        query_timeout: 10_000,
      });
      client.on('error', () => this.drop());
      try {
        await client.connect();
      } catch (error) {
        this.connecting = null;
        throw error;
      }
      this.client = client;
      this.connecting = null;
      return client;
    })();
    return this.connecting;
  }

  async close(): Promise<void> {
    const client = this.client;
    this.client = null;
    await client?.end().catch(() => {});
  }

  private drop(): void {
    const client = this.client;
    this.client = null;
    void client?.end().catch(() => {});
  }
}

/**
 * The cluster of the failover scenarios: a PostgreSQL primary and a hot standby (test/postgresPair.ts),
 * synchronous or asynchronous, fresh for each run. TDP is given both hosts in one URL and finds the
 * primary itself; the peers, whose driver takes one host, reach the database through a stand-in for the
 * virtual IP (or DNS name) a failover manager moves: a proxy re-pointed at the standby once it is
 * promoted. The failover is what such a manager does: the primary dies, it waits a moment to be sure,
 * promotes the standby and moves the address.
 */
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { PostgresPair } from '../../test/postgresPair.ts';
import { TcpProxy } from '../../test/tcpProxy.ts';
import type { Cluster } from './cluster.ts';

/** How long the failover manager waits after the primary went before it promotes the standby. */
const decisionMs = 1_000;

export class PairCluster implements Cluster {
  private constructor(
    private readonly pair: PostgresPair,
    private address: TcpProxy,
  ) {}

  static async start(options: { synchronous: boolean }): Promise<PairCluster> {
    const pair = await PostgresPair.start(options);
    const address = new TcpProxy('127.0.0.1', pair.primary.port);
    await address.start();
    return new PairCluster(pair, address);
  }

  urlFor(database: string, options: { multiHost?: boolean } = {}): string {
    if (options.multiHost) return this.pair.urlFor(database);
    return this.pair
      .nodeUrl(this.pair.primary, database)
      .replace(`:${this.pair.primary.port}/`, `:${this.address.port}/`);
  }

  async createDatabase(prefix: string): Promise<string> {
    const name = `${prefix}_${randomBytes(3).toString('hex')}`;
    const client = new pg.Client({ connectionString: this.pair.nodeUrl(this.pair.primary, 'postgres') });
    await client.connect();
    try {
      await client.query(`CREATE DATABASE ${name}`);
    } finally {
      await client.end();
    }
    return name;
  }

  /** The run's cluster goes whole at `close`. */
  async dropDatabase(): Promise<void> {}

  /** The primary dies; after the decision time the standby is promoted and the address moves to it. */
  async failover(): Promise<void> {
    await this.pair.killPrimary();
    await this.address.cut();
    await sleep(decisionMs);
    await this.pair.promoteStandby();
    const port = this.address.port;
    this.address = new TcpProxy('127.0.0.1', this.pair.standby.port);
    await this.address.start(port);
  }

  async stopImmediate(): Promise<void> {
    await this.pair.killPrimary();
  }

  /** Nothing to start again: a failover's standby is the new primary. */
  async startPostgres(): Promise<void> {}

  async close(): Promise<void> {
    await this.address.cut();
    await this.pair.close();
  }
}

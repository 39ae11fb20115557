/**
 * The chaos scenarios: each starts its fault at the end of the steady phase and ends it after the
 * fault phase. Connections of the suite itself (application_name `chaos-monitor`) are spared.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { type Cluster, type Monitor, monitorName } from './cluster.ts';
import type { SystemUnderTest } from './system.ts';

export interface FaultContext {
  system: SystemUnderTest;
  cluster: Cluster;
  /** The suite's connection to the system's database. */
  monitor: Monitor;
  /** Sets the client's submission rate (jobs/s). */
  setRate(perSecond: number): void;
  /** The steady rate and what the two workers can do at most, jobs/s. */
  rate: number;
  capacity: number;
}

export interface Scenario {
  name: string;
  title: string;
  /**
   * Runs at another load than the suite's: `rate` jobs/s, `concurrency` slots per worker, a fault phase
   * of `faultMs` (some faults only show when many connections are busy at once).
   */
  load?: { rate: number; concurrency: number; faultMs: number };
  /** Runs on a fresh primary and standby (pairCluster.ts) instead of the suite's one PostgreSQL. */
  pair?: { synchronous: boolean };
  /**
   * Why accepted jobs may be lost in this scenario by design (asynchronous replication): the loss is
   * reported, not counted against the system.
   */
  lossByDesign?: string;
  start(ctx: FaultContext): Promise<void>;
  end(ctx: FaultContext): Promise<void>;
}

/** pg_terminate_backend of every connection of the system's database but the suite's, 5 times a second. */
const terminateStorm = async ({ monitor }: FaultContext) => {
  stopRepeat = repeat(200, async () => {
    await monitor.query(
      `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
       WHERE datname = current_database() AND pid <> pg_backend_pid() AND application_name <> $1`,
      [monitorName],
    );
  });
};

/** The primary dies under load; a failover manager promotes the standby (pairCluster.ts). */
const failover = ({ cluster }: FaultContext) => {
  if (!cluster.failover) throw new Error('a failover scenario needs a primary and a standby');
  return cluster.failover();
};

/**
 * The load at which the database faults once ended a replica: many connections busy at once, so a
 * terminated one often had a write waiting for its flush.
 */
export const wideLoad = { rate: 50, concurrency: 64, faultMs: 10_000 };

/** Runs `action` every `everyMs` until the returned stop is called (which waits for the last round). */
function repeat(everyMs: number, action: () => Promise<void>): () => Promise<void> {
  let stopped = false;
  const loop = (async () => {
    while (!stopped) {
      await action().catch(() => {});
      await sleep(everyMs);
    }
  })();
  return async () => {
    stopped = true;
    await loop;
  };
}

let stopRepeat: (() => Promise<void>) | null = null;
let held: pg.Client[] = [];

async function stopRepeating(): Promise<void> {
  await stopRepeat?.();
  stopRepeat = null;
}

async function releaseHeld(): Promise<void> {
  await Promise.all(held.map((client) => client.end().catch(() => {})));
  held = [];
}

/** A connection of the suite that is not spared by the faults (it *is* the fault). */
async function openSession(url: string, name: string): Promise<pg.Client> {
  const client = new pg.Client({
    connectionString: url,
    application_name: name,
    connectionTimeoutMillis: 3_000,
  });
  client.on('error', () => {});
  await client.connect();
  return client;
}

export const scenarios: Scenario[] = [
  {
    name: 'replica-kill',
    title: 'SIGKILL of a server replica, restarted after the fault phase',
    start: ({ system }) => system.replica.kill(),
    end: ({ system }) => system.replica.restart(),
  },
  {
    name: 'worker-kills',
    title: 'SIGKILL of a worker every 2 s (each restarted at once)',
    start: async ({ system }) => {
      let next = 0;
      stopRepeat = repeat(2_000, async () => {
        const worker = system.workers[next++ % system.workers.length]!;
        await worker.kill();
        await worker.restart();
      });
    },
    end: stopRepeating,
  },
  {
    name: 'pg-restart',
    title: 'PostgreSQL stopped (immediate) for the fault phase, then started',
    start: ({ cluster }) => cluster.stopImmediate(),
    end: ({ cluster }) => cluster.startPostgres(),
  },
  {
    name: 'pg-failover',
    title: 'the primary killed, the synchronous standby promoted after 1 s (nothing acknowledged is lost)',
    pair: { synchronous: true },
    start: failover,
    end: async () => {},
  },
  {
    name: 'pg-failover-async',
    title:
      'the primary killed, the asynchronous standby promoted after 1 s (what it had not received is lost)',
    pair: { synchronous: false },
    lossByDesign: 'asynchronous replication: commits the standby had not received when the primary died',
    start: failover,
    end: async () => {},
  },
  {
    name: 'terminate-storm',
    title: "pg_terminate_backend of all the system's connections, 5 times a second",
    start: terminateStorm,
    end: stopRepeating,
  },
  {
    name: 'terminate-storm-wide',
    title:
      "the same storm at 50 jobs/s on 2 workers × 64 slots (where a closed connection's late flush once ended a replica)",
    load: wideLoad,
    start: terminateStorm,
    end: stopRepeating,
  },
  {
    name: 'slots-full',
    title: 'every free connection slot taken by an idle session',
    start: async ({ cluster, monitor }) => {
      await monitor.connect();
      for (;;) {
        try {
          held.push(await openSession(cluster.urlFor('postgres'), 'chaos-idle'));
        } catch {
          return; // "sorry, too many clients already": the slots are full
        }
      }
    },
    end: releaseHeld,
  },
  {
    name: 'idle-in-tx',
    title: 'an idle-in-transaction session holding back vacuum',
    start: async ({ cluster, system }) => {
      const session = await openSession(cluster.urlFor(system.database), 'chaos-idle-in-transaction');
      await session.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
      await session.query('SELECT count(*) FROM pg_class'); // takes the snapshot that pins the horizon
      held.push(session);
    },
    end: releaseHeld,
  },
  {
    name: 'overload',
    title: 'submissions at 1.5× what the workers can do, then back to the steady rate',
    start: async ({ setRate, capacity }) => setRate(capacity * 1.5),
    end: async ({ setRate, rate }) => setRate(rate),
  },
];

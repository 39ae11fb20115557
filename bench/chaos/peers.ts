/**
 * pg-boss and graphile-worker under chaos: each peer's own worker in two processes, and a client in the
 * suite's process that submits with the peer's own de-duplication (pg-boss: a job id derived from the
 * key, which `send` skips when it exists; graphile-worker: `jobKey` with `unsafe_dedupe`, which skips a
 * key while its job exists). The peers have no server, so "SIGKILL of a replica" kills worker 1.
 */
import { createHash } from 'node:crypto';
import pg from 'pg';
import { type Cluster, Monitor } from './cluster.ts';
import { ProcessGroup } from './processes.ts';
import { Completions, type SystemOptions, type SystemUnderTest, workerEnv } from './system.ts';

const terminateDeadlineMs = 15_000;

/** A pool that survives the faults (a pg pool emits `error` for a dropped idle connection). */
function resilientPool(url: string): pg.Pool {
  const pool = new pg.Pool({ connectionString: url, max: 8, connectionTimeoutMillis: 5_000 });
  pool.on('error', () => {});
  pool.on('connect', (client) => client.on('error', () => {}));
  return pool;
}

/** A UUID derived from the key, so a retried send names the same job. */
function uuidFromKey(key: string): string {
  const h = createHash('sha256').update(key).digest('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-4${h.slice(13, 16)}-a${h.slice(17, 20)}-${h.slice(20, 32)}`;
}

function startWorkers(system: string, url: string, runName: string, options: SystemOptions) {
  const processes = new ProcessGroup(runName);
  const completions = new Completions();
  const workers = [1, 2].map((i) =>
    processes.add(
      `worker-${i}`,
      ['bench/chaos/worker.ts', system],
      { ...workerEnv(options), DATABASE_URL: url },
      completions.onLine,
    ),
  );
  for (const worker of workers) worker.start();
  const restartable = workers.map((w) => ({
    name: w.name,
    kill: () => w.kill(),
    restart: async () => w.start(),
  }));
  return { processes, completions, workers: restartable };
}

/** Keys with more than one job that ran to completion. */
function keysRunAsSeveralJobs(completions: Completions): number {
  let n = 0;
  for (const runs of completions.byKey.values()) if (new Set(runs.map((r) => r.job)).size > 1) n += 1;
  return n;
}

export async function startPgBoss(
  cluster: Cluster,
  runName: string,
  options: SystemOptions,
): Promise<SystemUnderTest> {
  const database = await cluster.createDatabase('chaos_pgboss');
  const url = cluster.urlFor(database);
  const { PgBoss } = await import('pg-boss');
  const boss = new PgBoss({ connectionString: url, max: 8, supervise: false, schedule: false } as never);
  boss.on('error', () => {});
  await boss.start();
  // A worker's heartbeat (pg-boss's lease): a job of a killed worker is retried once it is missed.
  await boss.createQueue('chaos', { heartbeatSeconds: 10, retryLimit: 20, retryDelay: 1 } as never);
  const { processes, completions, workers } = startWorkers('pgboss', url, runName, options);
  const monitor = new Monitor(url);
  return {
    name: 'pg-boss',
    database,
    processes,
    completions,
    replica: workers[0]!,
    workers,
    submit: async (key, sentAt) => {
      await boss.send('chaos', { key, sentAt }, { id: uuidFromKey(key) });
    },
    finished: async () => {
      const rows = await monitor.query<{ key: string }>(
        `SELECT data->>'key' AS key FROM pgboss.job WHERE name = 'chaos' AND state = 'completed'`,
      );
      return rows && new Set(rows.map((r) => r.key));
    },
    integrity: async () => {
      const rows = await monitor.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM (SELECT 1 FROM pgboss.job WHERE name = 'chaos'
         GROUP BY data->>'key' HAVING count(*) > 1) d`,
      );
      const n = rows?.[0]?.n;
      return n === undefined
        ? null
        : {
            rowsPerKey: Math.max(n, keysRunAsSeveralJobs(completions)),
            stepSuccesses: null,
            versionGaps: null,
          };
    },
    unresponsive: async () => [],
    close: async () => {
      await boss.stop({ graceful: false, wait: false } as never).catch(() => {});
      await processes.close(terminateDeadlineMs);
      await monitor.close();
    },
  };
}

export async function startGraphile(
  cluster: Cluster,
  runName: string,
  options: SystemOptions,
): Promise<SystemUnderTest> {
  const database = await cluster.createDatabase('chaos_graphile');
  const url = cluster.urlFor(database);
  const { makeWorkerUtils, Logger } = await import('graphile-worker');
  const pgPool = resilientPool(url);
  const utils = await makeWorkerUtils({ pgPool, logger: new Logger(() => () => {}) });
  await utils.migrate();
  const { processes, completions, workers } = startWorkers('graphile', url, runName, options);
  const monitor = new Monitor(url);
  /** Keys whose job is still in the queue (graphile-worker deletes a job once it succeeded). */
  const queued = async () => {
    const rows = await monitor.query<{ key: string; id: string }>(
      `SELECT key, id::text FROM graphile_worker._private_jobs WHERE key IS NOT NULL`,
    );
    return rows && new Map(rows.map((r) => [r.key, r.id]));
  };
  return {
    name: 'graphile-worker',
    database,
    processes,
    completions,
    replica: workers[0]!,
    workers,
    submit: async (key, sentAt) => {
      await utils.addJob('chaos', { key, sentAt }, { jobKey: key, jobKeyMode: 'unsafe_dedupe' });
    },
    finished: async () => {
      const pending = await queued();
      if (!pending) return null;
      return new Set([...completions.byKey.keys()].filter((key) => !pending.has(key)));
    },
    integrity: async () => {
      const pending = await queued();
      if (!pending) return null;
      // A new job queued for a key whose job already ran to completion is a second job for it.
      const again = [...pending].filter(([key, id]) =>
        completions.byKey.get(key)?.some((run) => run.job !== id),
      ).length;
      return {
        rowsPerKey: keysRunAsSeveralJobs(completions) + again,
        stepSuccesses: null,
        versionGaps: null,
      };
    },
    unresponsive: async () => [],
    close: async () => {
      await processes.close(terminateDeadlineMs);
      await Promise.resolve(utils.release()).catch(() => {});
      await pgPool.end().catch(() => {});
      await monitor.close();
    },
  };
}

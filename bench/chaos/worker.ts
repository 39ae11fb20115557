/**
 * A worker process of the chaos suite, for one system: `tdp` (the `tdp worker` runtime with one
 * I/O-bound capability, capabilities.ts, instead of the built-in ones), `pgboss` or `graphile` (each
 * peer's own worker).
 * Every job sleeps `CHAOS_SLEEP_MS` and then prints one JSON line `{ done, job, at }` on stdout — the
 * key, the system's id of the job and the time — so the suite sees every execution, even of a process
 * it later SIGKILLs.
 *
 *   node --conditions=@tdp/source --import tsx bench/chaos/worker.ts <tdp|pgboss|graphile>
 *   (TDP: TDP_URL, TDP_WORKER_KEY, TDP_WORKER_DB, TDP_WORKER_CONCURRENCY; peers: DATABASE_URL)
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { startWorkerFromEnv } from '@tdp/worker/main';

const system = process.argv[2] as 'tdp' | 'pgboss' | 'graphile';
const sleepMs = Number(process.env.CHAOS_SLEEP_MS ?? 50);
const concurrency = Number(process.env.CHAOS_CONCURRENCY ?? 2);

interface Payload {
  key: string;
  sentAt: number;
}

async function work(payload: Payload, job: string): Promise<void> {
  await sleep(sleepMs);
  process.stdout.write(
    `${JSON.stringify({ done: payload.key, job, at: Date.now(), worker: process.env.TDP_WORKER_NAME })}\n`,
  );
}

async function runTdp() {
  // Its attempts run in capability runners, as every `tdp worker`'s do.
  await startWorkerFromEnv(
    { ...process.env, TDP_WORKER_CONCURRENCY: String(concurrency) },
    new URL('./capabilities.ts', import.meta.url),
  );
}

async function runPgBoss() {
  const { PgBoss } = await import('pg-boss');
  const boss = new PgBoss({ connectionString: process.env.DATABASE_URL!, max: 4 });
  // pg-boss reports connection faults here; the process carries on (or not) by pg-boss's own rules.
  boss.on('error', (error) => process.stderr.write(`pg-boss error: ${(error as Error).message}\n`));
  await boss.start();
  await boss.work(
    'chaos',
    { batchSize: 1, localConcurrency: concurrency, pollingIntervalSeconds: 0.5 },
    async ([job]: { id: string; data: Payload }[]) => work(job!.data, job!.id),
  );
}

async function runGraphile() {
  const { run, Logger } = await import('graphile-worker');
  await run({
    connectionString: process.env.DATABASE_URL!,
    logger: new Logger(() => (level, message) => {
      if (level === 'error' || level === 'warning')
        process.stderr.write(`graphile-worker ${level}: ${message}\n`);
    }),
    concurrency,
    maxPoolSize: 4,
    noHandleSignals: true,
    pollInterval: 500,
    taskList: { chaos: async (payload, helpers) => work(payload as Payload, String(helpers.job.id)) },
  });
}

const runners = { tdp: runTdp, pgboss: runPgBoss, graphile: runGraphile };
await runners[system]();

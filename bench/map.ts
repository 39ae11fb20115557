/**
 * `npm run bench -- map`: one task whose map step runs a no-op capability over 10,000 items on 2 worker
 * processes — items per second from the first item's start to the task's end (the last item's
 * completion), and the rows the database took per item (inserted, updated and deleted, from
 * pg_stat_user_tables) — beside the same 10,000 no-op jobs through graphile-worker with 2 worker
 * processes, on the same embedded PostgreSQL (a database each), in the same run. TDP runs twice: with
 * no maxParallel (the workers' slots bound it: 256 each, as in `bench -- e2e`), and with maxParallel 32,
 * as many at once as graphile-worker's 2 processes × 16 jobs. `BENCH_MAP_ITEMS` sets the size,
 * `BENCH_MAP_PARALLEL` the first run's maxParallel.
 */
import { type ChildProcess, fork } from 'node:child_process';
import { startTemporaryPostgres } from '../packages/cli/src/embeddedPostgres.ts';
import type { Sql } from '../packages/server/src/adapters/outbound/postgres/database.ts';
import { connectDatabase } from '../packages/server/src/main.ts';
import { benchDatabase, sane, sized, smoke, startBenchServer } from './support.ts';

const total = sized('BENCH_MAP_ITEMS', 10_000, 300);
const parallel = process.env.BENCH_MAP_PARALLEL;
/** The map's maxParallel in the main run (none: the workers' slots bound it). */
const maxParallel = parallel ? Number(parallel) : undefined;
/** A second TDP run with as many items at once as graphile-worker runs jobs (2 processes × 16). */
const graphileAtOnce = 32;
const timeoutMs = sized(null, 600_000, 120_000);

interface Figures {
  perSecond: number;
  rowsPerItem: number;
  seconds: number;
}

/** Two worker processes of bench/e2eWorker.ts; `started()` counts the jobs they have begun. */
function startWorkers(system: 'tdp' | 'graphile', target: string, secret: string) {
  const counts = new Map<number, number>();
  const children: ChildProcess[] = [];
  for (let i = 0; i < 2; i += 1) {
    const child = fork('bench/e2eWorker.ts', [system, target, secret], {
      execArgv: ['--conditions=@tdp/source', '--import', 'tsx'],
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    child.on('message', (m: { type: string; handled: number }) => {
      if (m.type === 'count') counts.set(i, m.handled);
    });
    children.push(child);
  }
  return {
    started: () => [...counts.values()].reduce((a, b) => a + b, 0),
    stop: () =>
      Promise.all(
        children.map(
          (c) =>
            new Promise((resolve) => {
              if (c.exitCode !== null) return resolve(null);
              c.once('exit', resolve);
              c.kill('SIGKILL');
            }),
        ),
      ),
  };
}

/** Rows inserted, updated and deleted in the database so far (every user table). */
async function rowsWritten(sql: Sql): Promise<number> {
  const [row] = await sql<{ n: string }[]>`
    SELECT coalesce(sum(n_tup_ins + n_tup_upd + n_tup_del), 0)::bigint AS n FROM pg_stat_user_tables`;
  return Number(row!.n);
}

/** The statistics of other backends reach pg_stat_user_tables within a second of their commits. */
const statsSettle = () => new Promise((r) => setTimeout(r, 1_500));

async function until(what: string, done: () => Promise<boolean> | boolean, everyMs = 10) {
  const deadline = Date.now() + timeoutMs;
  while (!(await done())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/** First item start → last completion, timed by the worker's first start and the end of the run. */
async function timeRun(started: () => number, finished: () => Promise<boolean>) {
  await until('the first start', () => started() > 0, 2);
  const t0 = performance.now();
  await until('the last completion', finished);
  return (performance.now() - t0) / 1000;
}

async function benchTdp(adminUrl: string, maxParallel: number | undefined): Promise<Figures> {
  const database = await benchDatabase(adminUrl);
  const server = await startBenchServer(database.url);
  const sql = connectDatabase({ url: database.url, maxConnections: 1 });
  const headers = { authorization: `Bearer ${server.apiKey}`, 'content-type': 'application/json' };
  const workerKey = (
    (await (
      await fetch(`${server.base}/admin/v1/worker-credentials`, {
        method: 'POST',
        headers: { authorization: `Bearer ${server.adminToken}`, 'content-type': 'application/json' },
        body: '{}',
      })
    ).json()) as { key: string }
  ).key;
  const published = await fetch(`${server.base}/v1/workflow-definitions`, {
    method: 'POST',
    headers,
    body: JSON.stringify({
      name: 'bench-map',
      version: '1',
      steps: [
        {
          key: 'each',
          kind: 'map',
          map: {
            items: '$.input.items',
            capability: 'noop',
            capabilityVersion: '1',
            inputMapping: { n: '$.item' },
            ...(maxParallel ? { maxParallel } : {}),
          },
        },
      ],
    }),
  });
  if (published.status !== 201) throw new Error(`publish: ${published.status} ${await published.text()}`);
  const workers = startWorkers('tdp', server.base, workerKey);
  try {
    // Both workers registered before the task exists, so the first items go to both.
    await new Promise((r) => setTimeout(r, 1_500));
    const before = await rowsWritten(sql);
    const created = await fetch(`${server.base}/v1/tasks`, {
      method: 'POST',
      headers: { ...headers, 'idempotency-key': `map-${Date.now()}` },
      body: JSON.stringify({
        workflowName: 'bench-map',
        workflowVersion: '1',
        name: 'map bench',
        input: { items: Array.from({ length: total }, (_, i) => i) },
      }),
    });
    if (created.status !== 201) throw new Error(`create: ${created.status} ${await created.text()}`);
    const taskId = ((await created.json()) as { task: { id: string } }).task.id;
    const seconds = await timeRun(workers.started, async () => {
      const [row] = await sql<{ lifecycle_status: string }[]>`
        SELECT lifecycle_status FROM task WHERE id = ${taskId}`;
      if (row?.lifecycle_status === 'FAILED') throw new Error('the map task failed');
      return row?.lifecycle_status === 'SUCCEEDED';
    });
    await statsSettle();
    const rows = (await rowsWritten(sql)) - before;
    const [output] = await sql<{ n: number }[]>`
      SELECT jsonb_array_length(state_data) AS n FROM step WHERE task_id = ${taskId} AND step_key = 'each' AND current`;
    sane(output?.n === total, `the map's output has ${output?.n} of ${total} items`);
    return { perSecond: total / seconds, rowsPerItem: rows / total, seconds };
  } finally {
    await workers.stop();
    await sql.end();
    await server.stop();
    await database.close();
  }
}

async function benchGraphile(adminUrl: string): Promise<Figures> {
  const database = await benchDatabase(adminUrl);
  const { makeWorkerUtils, Logger } = await import('graphile-worker');
  const { default: pg } = await import('pg');
  const pgPool = new pg.Pool({ connectionString: database.url, max: 4 });
  pgPool.on('error', () => {});
  pgPool.on('connect', (client) => client.on('error', () => {}));
  const utils = await makeWorkerUtils({ pgPool, logger: new Logger(() => () => {}) });
  await utils.migrate();
  const sql = connectDatabase({ url: database.url, maxConnections: 1 });
  try {
    await statsSettle();
    const before = await rowsWritten(sql);
    // The jobs are queued before the workers start, as the map's items are written when it begins.
    for (let i = 0; i < total; i += 1_000)
      await utils.addJobs(
        Array.from({ length: Math.min(1_000, total - i) }, (_, j) => ({
          identifier: 'noop',
          payload: { n: i + j },
        })),
      );
    const workers = startWorkers('graphile', database.url, '');
    try {
      const seconds = await timeRun(
        workers.started,
        async () =>
          (await pgPool.query('SELECT count(*)::int AS n FROM graphile_worker._private_jobs')).rows[0].n ===
          0,
      );
      await statsSettle();
      const rows = (await rowsWritten(sql)) - before;
      return { perSecond: total / seconds, rowsPerItem: rows / total, seconds };
    } finally {
      await workers.stop();
    }
  } finally {
    await sql.end();
    await utils.release();
    await pgPool.end();
    await database.close();
  }
}

export async function benchMap(): Promise<void> {
  console.log(
    `map: one task mapping a no-op capability over ${total} items, 2 worker processes (256 slots each); graphile-worker: ${total} no-op jobs, 2 worker processes (16 jobs at once each)`,
  );
  const line = (name: string, f: Figures, unit: string) =>
    console.log(
      `  ${name.padEnd(34)} ${f.perSecond.toFixed(0).padStart(6)} ${unit}/s  ${f.rowsPerItem.toFixed(2)} rows written/${unit.slice(0, -1)}  (${f.seconds.toFixed(1)} s)`,
    );
  const postgres = await startTemporaryPostgres();
  try {
    const tdp = await benchTdp(postgres.adminUrl, maxParallel);
    line(`TDP map, maxParallel ${maxParallel ?? 'none'}`, tdp, 'items');
    if (smoke) return;
    const alike = await benchTdp(postgres.adminUrl, graphileAtOnce);
    line(`TDP map, maxParallel ${graphileAtOnce}`, alike, 'items');
    const graphile = await benchGraphile(postgres.adminUrl);
    line('graphile-worker', graphile, 'jobs');
    console.log(
      `  TDP items/s ÷ graphile-worker jobs/s: ${(tdp.perSecond / graphile.perSecond).toFixed(2)} (target >= 0.5); ` +
        `with ${graphileAtOnce} at once like graphile-worker: ${(alike.perSecond / graphile.perSecond).toFixed(2)}`,
    );
  } finally {
    await postgres.stop();
  }
}

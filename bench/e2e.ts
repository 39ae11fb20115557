/**
 * `npm run bench -- e2e`: a one-step no-op workflow on TDP against graphile-worker and pg-boss doing the
 * same, on the same PostgreSQL. Each: 10,000 jobs submitted one per call by 16 concurrent clients and
 * processed by 2 worker processes (throughput from first submit to last start), then — once the system
 * has finished those jobs — submit → start latency at a steady 100 jobs/s. CPU ms/job is what the whole
 * machine (database, server, workers, clients) spent per job during the burst, from /proc/stat.
 */

import { type ChildProcess, fork } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { Pool } from 'undici';
import { connectDatabase } from '../packages/server/src/main.ts';
import { startTemporal, temporalBinary } from '../test/temporal.ts';
import { describeServerView, scrapeMetrics } from './serverView.ts';
import {
  benchDatabase,
  benchPost,
  cpuSeconds,
  noopWorkflow,
  percentile,
  runLoad,
  sane,
  sized,
  smoke,
  startBenchServer,
} from './support.ts';

const total = sized('BENCH_E2E_COUNT', 10_000, 300);
const steadyCount = sized('BENCH_E2E_STEADY', 1_000, 200);
/** Jobs each system runs before it is measured. */
const warm = sized(null, 300, 50);
/** How long a system may take to start a burst's jobs, and to finish them. */
const startTimeoutMs = sized(null, 600_000, 60_000);
const settleTimeoutMs = sized(null, 300_000, 60_000);
/**
 * `BENCH_E2E_SYSTEMS` picks the systems by name, comma-separated (`TDP`, `TDP (temporal)`,
 * `graphile-worker`, `pg-boss`), e.g. `TDP` alone while profiling it with BENCH_PROFILE=1. A smoke run
 * has TDP's rows alone: the peers would show nothing about whether this bench still works.
 */
const only = process.env.BENCH_E2E_SYSTEMS ?? (smoke ? 'TDP,TDP (temporal)' : undefined);
const clients = 16;

export interface Workers {
  handled(): number;
  /** Jobs finished so far per tag (the payload's `tag`), over both processes. */
  completed(): Record<string, number>;
  /** Submit → start latencies since the last report: all of them, and per tag. */
  report(): Promise<{ latencies: number[]; tagged: Record<string, number[]> }>;
  latencies(): Promise<number[]>;
  stop(): Promise<void>;
}

/**
 * Two worker processes of `system` (bench/e2eWorker.ts). `env` gives them a fixed capacity (its
 * BENCH_WORKER_SLOTS and BENCH_WORKER_WORK_MS).
 */
export function startWorkers(
  system: string,
  target: string,
  secret: string,
  env: Record<string, string> = {},
): Workers {
  const children: ChildProcess[] = [];
  const counts = new Map<number, number>();
  const completions = new Map<number, Record<string, number>>();
  for (let i = 0; i < 2; i += 1) {
    const child = fork('bench/e2eWorker.ts', [system, target, secret], {
      execArgv: ['--conditions=@tdp/source', '--import', 'tsx'],
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      env: { ...process.env, ...env },
    });
    child.on('message', (m: { type: string; handled: number; completed: Record<string, number> }) => {
      if (m.type !== 'count') return;
      counts.set(i, m.handled);
      completions.set(i, m.completed);
    });
    children.push(child);
  }
  const report = async () => {
    type Report = { latencies: number[]; tagged: Record<string, number[]> };
    const all = await Promise.all(
      children.map(
        (child) =>
          new Promise<Report>((resolve) => {
            const listener = (m: Report & { type: string }) => {
              if (m.type === 'report') {
                child.off('message', listener);
                resolve(m);
              }
            };
            child.on('message', listener);
            child.send({ type: 'report' });
          }),
      ),
    );
    const tagged: Record<string, number[]> = {};
    for (const one of all)
      for (const [tag, values] of Object.entries(one.tagged))
        tagged[tag] = (tagged[tag] ?? []).concat(values);
    return { latencies: all.flatMap((one) => one.latencies), tagged };
  };
  return {
    handled: () => [...counts.values()].reduce((a, b) => a + b, 0),
    completed: () => {
      const total: Record<string, number> = {};
      for (const one of completions.values())
        for (const [tag, n] of Object.entries(one)) total[tag] = (total[tag] ?? 0) + n;
      return total;
    },
    report,
    latencies: async () => (await report()).latencies,
    stop: async () => {
      await Promise.all(
        children.map(
          (c) =>
            new Promise((resolve) => {
              if (c.exitCode !== null) return resolve(null);
              c.once('exit', resolve);
              c.kill('SIGKILL');
            }),
        ),
      );
    },
  };
}

async function waitFor(workers: Workers, count: number, timeoutMs = startTimeoutMs) {
  const deadline = Date.now() + timeoutMs;
  while (workers.handled() < count) {
    if (Date.now() > deadline) throw new Error(`only ${workers.handled()} of ${count} jobs started`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Jiffies (1/100 s) the machine's CPUs spent busy so far (user, nice, system, irq, softirq). */
function busyJiffies(): number {
  const [, user, nice, system, , , irq, softirq] = readFileSync('/proc/stat', 'utf8')
    .split('\n')[0]!
    .trim()
    .split(/\s+/)
    .map(Number);
  return user! + nice! + system! + irq! + softirq!;
}

export interface Figures {
  perSecond: number;
  /** CPU time the whole machine spent per job during the burst (each system runs alone). */
  cpuMsPerJob: number;
  p50: number;
  p99: number;
  /** The Temporal server's CPU time per job (the TDP (temporal) row). */
  engineCpuMsPerJob?: number;
  /** The rate the latency was measured at, jobs/s. */
  steadyPerSecond: number;
}

/** The latency phase's rate: 100/s, the same for TDP and its peers. */
const everyoneAt100 = () => 100;

/** Resolves once `pending()` (jobs of the system not yet finished) reaches zero. */
async function settle(pending: () => Promise<number>, timeoutMs = settleTimeoutMs) {
  const deadline = Date.now() + timeoutMs;
  while ((await pending()) > 0) {
    if (Date.now() > deadline) throw new Error('the system did not finish the burst');
    await new Promise((r) => setTimeout(r, 100));
  }
}

/**
 * Throughput (first submit → last start) and steady-state submit → start latency of one system. The
 * latency phase starts once the system has finished the burst's jobs (each system by its own count),
 * so it measures the steady state rather than what the burst left behind.
 */
async function measure(
  submit: (i: number, sentAt?: number) => Promise<void>,
  workers: Workers,
  pending: () => Promise<number>,
  checkpoint: () => Promise<void>,
  steadyRate: (burstPerSecond: number) => number = everyoneAt100,
  /** Called as the steady phase starts; what it returns, once its jobs have started (lines to print). */
  steadyView?: () => Promise<() => Promise<string[]>>,
): Promise<Figures> {
  await runLoad(warm, clients, (i) => submit(i));
  await waitFor(workers, warm);
  await workers.latencies();
  const startedAt = performance.now();
  const busyBefore = busyJiffies();
  const base = workers.handled();
  const created = await runLoad(total, clients, (i) => submit(warm + i));
  console.log(
    `  (burst: ${created.perSecond.toFixed(0)} submits/s, p99 ${created.p99.toFixed(1)} ms; ${workers.handled() - base} started by the last)`,
  );
  await waitFor(workers, base + total);
  const perSecond = total / ((performance.now() - startedAt) / 1000);
  const cpuMsPerJob = ((busyJiffies() - busyBefore) * 10) / total;
  await settle(pending);
  // The burst's writes are flushed before the latency phase, as they would be on a server that has
  // run for a while: on the new cluster each system starts on, the burst's WAL would otherwise still
  // be growing into new segment files (each one a 16 MB write that holds up every commit behind it).
  await checkpoint();
  await workers.latencies();
  const steadyBase = workers.handled();
  const endView = await steadyView?.();
  const t0 = performance.now();
  const sends: Promise<void>[] = [];
  const createMs: number[] = [];
  const steadyPerSecond = steadyRate(perSecond);
  for (let i = 0; i < steadyCount; i += 1) {
    const due = t0 + (i * 1000) / steadyPerSecond;
    const wait = due - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    const t = performance.now();
    sends.push(submit(warm + total + i, Date.now()).then(() => void createMs.push(performance.now() - t)));
  }
  await Promise.all(sends);
  createMs.sort((a, b) => a - b);
  console.log(
    `  (steady: submit answered p50 ${percentile(createMs, 50).toFixed(1)} ms, p99 ${percentile(createMs, 99).toFixed(1)} ms)`,
  );
  await waitFor(workers, steadyBase + steadyCount);
  for (const line of (await endView?.()) ?? []) console.log(line);
  const latencies = (await workers.latencies()).sort((a, b) => a - b);
  sane(latencies.length >= steadyCount, `${latencies.length} latencies of ${steadyCount} steady jobs`);
  return {
    perSecond,
    cpuMsPerJob,
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
    steadyPerSecond,
  };
}

/**
 * TDP's run. `database` (kept open) runs it on a database prepared by the caller, `serverEnv` with
 * settings of the server's own (the sweep bench: on a filled database, with and without the sweep).
 */
export async function benchTdp(
  options: {
    database?: Awaited<ReturnType<typeof benchDatabase>>;
    serverEnv?: Record<string, string>;
    /** The latency phase's rate from the burst's throughput (100/s by default, as for the peers). */
    steadyRate?: (burstPerSecond: number) => number;
  } = {},
): Promise<Figures> {
  const database = options.database ?? (await benchDatabase());
  const server = await startBenchServer(database.url, options.serverEnv);
  const workerKey = (
    await benchPost<{ key: string }>(server.base, '/admin/v1/worker-credentials', server.adminToken, {})
  ).key;
  const headers = { authorization: `Bearer ${server.apiKey}`, 'content-type': 'application/json' };
  await benchPost(server.base, '/v1/workflow-definitions', server.apiKey, noopWorkflow(['sentAt']));
  const workers = startWorkers('tdp', server.base, workerKey);
  const pool = new Pool(server.base, { connections: clients });
  const sql = connectDatabase({ url: database.url, maxConnections: 1 });
  const run = Date.now();
  try {
    return await measure(
      async (i, sentAt) => {
        const response = await pool.request({
          method: 'POST',
          path: '/v1/tasks',
          headers: { ...headers, 'idempotency-key': `${run}-${i}` },
          body: JSON.stringify({
            workflowName: 'noop',
            workflowVersion: '1',
            name: `noop ${i}`,
            input: { sentAt: sentAt ?? 0 },
          }),
        });
        await response.body.text();
        if (response.statusCode !== 201) throw new Error(`POST /v1/tasks answered ${response.statusCode}`);
      },
      workers,
      async () =>
        Number(
          (
            await sql`SELECT count(*) AS n FROM task
                      WHERE lifecycle_status NOT IN ('SUCCEEDED', 'FAILED', 'CANCELLED', 'TIMED_OUT')`
          )[0]!.n,
        ),
      database.checkpoint,
      options.steadyRate,
      async () => {
        const before = await scrapeMetrics(server.base);
        return async () => describeServerView(before, await scrapeMetrics(server.base));
      },
    );
  } finally {
    // Where the steady phase's starts came from: placed by the create's own transaction (same instant),
    // or by a scheduler round after it (and how long after).
    const [placed] = await sql`
      WITH d AS (SELECT extract(epoch FROM a.created_at - t.created_at) * 1000 AS ms
                 FROM task t JOIN attempt a ON a.task_id = t.id
                 ORDER BY t.created_at DESC LIMIT ${steadyCount})
      SELECT count(*) FILTER (WHERE ms = 0)::int AS inline, count(*)::int AS n,
             percentile_disc(0.99) WITHIN GROUP (ORDER BY ms) AS p99 FROM d`;
    console.log(
      `  (steady phase: ${placed!.inline} of ${placed!.n} placed by their create, create → attempt p99 ${Number(placed!.p99).toFixed(1)} ms)`,
    );
    await sql.end();
    await pool.close();
    await workers.stop();
    await server.stop();
    if (!options.database) await database.close();
  }
}

/**
 * TDP with Temporal as the engine (docs/temporal.md): a Temporal dev server (in memory) and NATS
 * JetStream on this machine, the server with TDP_ORCHESTRATOR=temporal. Its row has no target; it also
 * gives the Temporal server's own CPU per job, over every job of the run (burst, steady and warm-up).
 * Without the Temporal CLI or NATS the row is left out (under CI it fails).
 */
async function benchTdpTemporal(): Promise<Figures | null> {
  const binary = temporalBinary();
  const natsUrl = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
  if (!binary) {
    if (process.env.CI) throw new Error('the Temporal CLI is required under CI: run scripts/services.sh');
    console.log('  TDP (temporal): left out, no Temporal CLI (scripts/services.sh builds it)');
    return null;
  }
  const temporal = await startTemporal(binary);
  try {
    const prefix = `e2e${Date.now().toString(36)}`;
    const before = await cpuSeconds(temporal.pid);
    const figures = await benchTdp({
      serverEnv: {
        NATS_URL: natsUrl,
        TDP_NATS_SUBJECT_PREFIX: prefix,
        TDP_ORCHESTRATOR: 'temporal',
        TEMPORAL_ADDRESS: temporal.address,
        TEMPORAL_TASK_QUEUE: prefix,
      },
      // Below its capacity (at 100/s a slower engine measures its own queue, not its latency): half
      // the burst's throughput, at most 100/s.
      steadyRate: (burst) => Math.max(1, Math.min(100, Math.floor(burst / 2))),
    });
    const jobs = total + steadyCount + warm;
    return { ...figures, engineCpuMsPerJob: (((await cpuSeconds(temporal.pid)) - before) * 1000) / jobs };
  } finally {
    await temporal.stop();
  }
}

async function benchGraphile(): Promise<Figures> {
  const database = await benchDatabase();
  const { makeWorkerUtils, Logger } = await import('graphile-worker');
  const { default: pg } = await import('pg');
  const pgPool = new pg.Pool({ connectionString: database.url, max: clients });
  pgPool.on('error', () => {});
  pgPool.on('connect', (client) => client.on('error', () => {}));
  const utils = await makeWorkerUtils({ pgPool, logger: new Logger(() => () => {}) });
  await utils.migrate();
  const workers = startWorkers('graphile', database.url, '');
  try {
    return await measure(
      async (_i, sentAt) => {
        await utils.addJob('noop', { sentAt: sentAt ?? 0 });
      },
      workers,
      async () =>
        (await pgPool.query('SELECT count(*)::int AS n FROM graphile_worker._private_jobs')).rows[0]
          .n as number,
      database.checkpoint,
    );
  } finally {
    await workers.stop();
    await utils.release();
    await pgPool.end();
    await database.close();
  }
}

async function benchPgBoss(): Promise<Figures> {
  const database = await benchDatabase();
  const { PgBoss } = await import('pg-boss');
  const boss = new PgBoss({ connectionString: database.url, max: clients });
  boss.on('error', () => {});
  await boss.start();
  await boss.createQueue('noop', { notify: true } as never);
  const workers = startWorkers('pgboss', database.url, '');
  try {
    return await measure(
      async (_i, sentAt) => {
        await boss.send('noop', { sentAt: sentAt ?? 0 });
      },
      workers,
      async () => {
        const [stats] = await boss.getQueueStats('noop');
        return (stats?.queuedCount ?? 0) + (stats?.activeCount ?? 0);
      },
      database.checkpoint,
    );
  } finally {
    await workers.stop();
    await boss.stop({ graceful: false } as never).catch(() => {});
    await database.close();
  }
}

export async function benchE2e(): Promise<void> {
  console.log(
    `e2e: ${total} one-step no-op jobs, ${clients} submitting clients, 2 worker processes; latency at 100/s over ${steadyCount}`,
  );
  const results: [string, Figures][] = [];
  for (const [name, run] of [
    ['graphile-worker', benchGraphile],
    ['pg-boss', benchPgBoss],
    ['TDP', () => benchTdp()],
    ['TDP (temporal)', benchTdpTemporal],
  ] as const) {
    if (only && !only.split(',').includes(name)) continue;
    const figures = await run();
    if (!figures) continue;
    results.push([name, figures]);
    console.log(
      `  ${name.padEnd(16)} ${figures.perSecond.toFixed(0).padStart(6)} jobs/s  ${figures.cpuMsPerJob.toFixed(2)} CPU ms/job   submit→start p50 ${figures.p50.toFixed(1)} ms  p99 ${figures.p99.toFixed(1)} ms${figures.engineCpuMsPerJob !== undefined ? `  (Temporal server ${figures.engineCpuMsPerJob.toFixed(2)} CPU ms/job; latency at ${figures.steadyPerSecond}/s)` : ''}`,
    );
  }
  const tdp = results.find(([n]) => n === 'TDP')?.[1];
  const peers = results.filter(([n]) => !n.startsWith('TDP'));
  if (!tdp || peers.length === 0) return;
  // Each row: the system's figures and TDP's against them (throughput ratio, p99 ratio).
  console.log('');
  console.log('  | system          |  jobs/s | CPU ms/job |  p50 ms |  p99 ms | TDP÷ jobs/s | TDP÷ p99 |');
  console.log('  | --------------- | ------- | ---------- | ------- | ------- | ----------- | -------- |');
  for (const [name, f] of results) {
    const cells = [
      name.padEnd(15),
      f.perSecond.toFixed(0).padStart(7),
      f.cpuMsPerJob.toFixed(2).padStart(10),
      f.p50.toFixed(1).padStart(7),
      f.p99.toFixed(1).padStart(7),
      (tdp.perSecond / f.perSecond).toFixed(2).padStart(11),
      (tdp.p99 / f.p99).toFixed(2).padStart(8),
    ];
    console.log(`  | ${cells.join(' | ')} |`);
  }
  // The targets: graphile-worker's throughput and CPU per job, the best peer's p99.
  const graphile = peers.find(([n]) => n === 'graphile-worker')?.[1];
  const bestP99 = Math.min(...peers.map(([, f]) => f.p99));
  for (const [name, f] of results.filter(([n]) => n === 'TDP')) {
    const against = graphile
      ? `jobs/s ${(f.perSecond / graphile.perSecond).toFixed(2)} of graphile-worker's (target >= 1), ` +
        `CPU ms/job ${(f.cpuMsPerJob / graphile.cpuMsPerJob).toFixed(2)} of its (target <= 1), `
      : '';
    console.log(
      `  ${name}: ${against}p99 ${f.p99.toFixed(1)} ms against the best peer's ${bestP99.toFixed(1)} ms (target <=)`,
    );
  }
}

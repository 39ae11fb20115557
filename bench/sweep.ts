/**
 * `npm run bench -- sweep`: what the retention sweep costs a loaded server, and how fast it archives
 * meanwhile. One database is filled with finished tasks older than the retention window (growth's fill:
 * BENCH_SWEEP_TASKS, smoke 2,000, each copy of a task that really ran); the e2e bench's TDP run (its own
 * code: the burst's throughput and CPU per job, then submit → start at a steady 100/s) runs on it twice:
 * first with the sweep off (`TDP_RETENTION_SWEEP=off`), then with it archiving (`TDP_RETENTION_DAYS=1`,
 * an archive directory). Printed: both e2e rows, the ratios, and the sweep's tasks and rows archived per
 * second during the second run. The second run has the first run's tasks on top of the fill (one e2e
 * run's worth, ~1% of the full fill), and the sweep deletes as it goes, so its database shrinks.
 */
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connectDatabase } from '../packages/server/src/main.ts';
import { benchTdp, type Figures } from './e2e.ts';
import { fill, finishedTask } from './growth.ts';
import { benchDatabase, sane, sized } from './support.ts';

const TASKS = sized('BENCH_SWEEP_TASKS', 200_000, 2_000);
/** Two days back: every copy is past a one-day retention window. */
const BACK_SECONDS = 2 * 86_400;

const row = (name: string, f: Figures) =>
  `  ${name.padEnd(22)} ${f.perSecond.toFixed(0).padStart(6)} jobs/s  ${f.cpuMsPerJob.toFixed(2)} CPU ms/job   submit→start p50 ${f.p50.toFixed(1)} ms  p99 ${f.p99.toFixed(1)} ms`;

export async function benchSweep(): Promise<void> {
  const database = await benchDatabase();
  const sql = connectDatabase({
    url: database.url,
    maxConnections: 1,
    statementTimeoutMs: 0,
    answerDeadlineMs: 3_600_000,
  });
  const archive = await mkdtemp(join(tmpdir(), 'tdp-bench-archive-'));
  /** Rows the archive holds, by the manifests of the batches whose delete committed (their tombstones). */
  const archivedRows = async () => {
    const done = new Set(
      (await sql<{ batch_id: string }[]>`SELECT DISTINCT batch_id FROM archived_task`).map((r) => r.batch_id),
    );
    let rows = 0;
    for (const day of await readdir(archive))
      for (const batch of await readdir(join(archive, day))) {
        if (!done.has(batch)) continue;
        const manifest = JSON.parse(await readFile(join(archive, day, batch, 'manifest.json'), 'utf8')) as {
          tables: { rows: number }[];
        };
        rows += manifest.tables.reduce((sum, t) => sum + t.rows, 0);
      }
    const [tombstones] = await sql<{ n: number }[]>`SELECT count(*)::int AS n FROM archived_task`;
    return { tasks: tombstones!.n, rows };
  };
  try {
    console.log(
      `sweep: ${TASKS} finished tasks past a 1-day retention; the e2e TDP run on them without, then with the sweep`,
    );
    const template = await finishedTask(database.url);
    await fill(sql, template, TASKS, BACK_SECONDS);
    await sql`VACUUM ANALYZE`;
    await database.checkpoint();

    const without = await benchTdp({ database, serverEnv: { TDP_RETENTION_SWEEP: 'off' } });
    console.log(row('TDP, sweep off', without));
    const started = performance.now();
    const withSweep = await benchTdp({
      database,
      serverEnv: { TDP_RETENTION_SWEEP: 'on', TDP_RETENTION_DAYS: '1', TDP_ARCHIVE_DIR: archive },
    });
    const seconds = (performance.now() - started) / 1000;
    const { tasks, rows } = await archivedRows();
    console.log(row('TDP, sweep archiving', withSweep));
    sane(tasks > 0, 'the sweep archived no task during the run');
    console.log(
      `  sweep during the run: ${(tasks / seconds).toFixed(0)} tasks/s, ${(rows / seconds).toFixed(0)} rows/s archived and deleted (${tasks} tasks, ${rows} rows in ${seconds.toFixed(0)} s)`,
    );
    console.log(
      `  with / without the sweep: throughput ${(withSweep.perSecond / without.perSecond).toFixed(2)}, CPU per job ${(withSweep.cpuMsPerJob / without.cpuMsPerJob).toFixed(2)}, p99 ${(withSweep.p99 / without.p99).toFixed(2)}`,
    );
  } finally {
    await sql.end();
    await database.close();
    await rm(archive, { recursive: true, force: true });
  }
}

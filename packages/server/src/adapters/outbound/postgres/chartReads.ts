/** The dashboard's charts: task counts over time buckets, and the once-a-minute gauge samples. */
import type {
  ChartBucket,
  ChartReads,
  ChartWindow,
  MetricSample,
  MetricSamples,
} from '../../../core/operations/charts.ts';
import type { Sql } from './database.ts';

/** Buckets are cut from the Unix epoch (as `chartWindow` cuts them). */
const origin = new Date(0);

export class PostgresChartReads implements ChartReads, MetricSamples {
  constructor(private readonly sql: Sql) {}

  /**
   * One statement: the window's buckets, each with the tasks created, finished and started in it
   * (date_bin over the task table's time indexes) and the highest gauge sampled in it. Counted over
   * `tenants` only when named; the gauges are the platform's, so a tenant's reader gets none.
   */
  async buckets(window: ChartWindow, tenants: 'all' | string[]): Promise<ChartBucket[]> {
    const { first, end } = window;
    const only = tenants === 'all' ? null : tenants;
    const bucket = `${window.bucketSeconds} seconds`;
    const last = new Date(end.getTime() - window.bucketSeconds * 1000);
    const rows = await this.sql`
      WITH bucket AS (
        SELECT generate_series(${first}::timestamptz, ${last}::timestamptz, ${bucket}::interval) AS at
      ), created AS (
        SELECT date_bin(${bucket}::interval, created_at, ${origin}) AS at, count(*)::int AS n
        FROM task WHERE created_at >= ${first} AND created_at < ${end}
          AND (${only}::uuid[] IS NULL OR tenant_id = ANY(${only}::uuid[]))
        GROUP BY 1
      ), finished AS (
        SELECT date_bin(${bucket}::interval, finished_at, ${origin}) AS at, count(*)::int AS n
        FROM task WHERE finished_at >= ${first} AND finished_at < ${end}
          AND (${only}::uuid[] IS NULL OR tenant_id = ANY(${only}::uuid[]))
        GROUP BY 1
      ), started AS (
        SELECT date_bin(${bucket}::interval, started_at, ${origin}) AS at,
               percentile_cont(0.5) WITHIN GROUP (ORDER BY started_at - created_at) AS p50,
               percentile_cont(0.99) WITHIN GROUP (ORDER BY started_at - created_at) AS p99
        FROM task WHERE started_at >= ${first} AND started_at < ${end}
          AND (${only}::uuid[] IS NULL OR tenant_id = ANY(${only}::uuid[]))
        GROUP BY 1
      ), sampled AS (
        SELECT date_bin(${bucket}::interval, minute, ${origin}) AS at,
               max(queue_depth) AS queue_depth, max(waiting_for_worker) AS waiting_for_worker,
               max(stale_steps) AS stale_steps,
               max(outbox_backlog) AS outbox_backlog, max(outbox_oldest_age_ms) AS outbox_oldest_age_ms,
               max(outbox_dead) AS outbox_dead,
               max(relay_backlog) AS relay_backlog, max(relay_oldest_age_ms) AS relay_oldest_age_ms,
               max(relay_dead) AS relay_dead,
               max(callback_backlog) AS callback_backlog, max(callback_oldest_age_ms) AS callback_oldest_age_ms,
               max(callback_dead) AS callback_dead
        FROM metric_sample WHERE minute >= ${first} AND minute < ${end} AND ${only}::uuid[] IS NULL
        GROUP BY 1
      )
      SELECT b.at, coalesce(c.n, 0) AS created, coalesce(f.n, 0) AS finished,
             extract(epoch FROM s.p50) * 1000 AS p50_ms, extract(epoch FROM s.p99) * 1000 AS p99_ms,
             m.queue_depth, m.waiting_for_worker, m.stale_steps, m.outbox_backlog, m.outbox_oldest_age_ms,
             m.outbox_dead, m.relay_backlog, m.relay_oldest_age_ms, m.relay_dead, m.callback_backlog,
             m.callback_oldest_age_ms, m.callback_dead
      FROM bucket b
      LEFT JOIN created c ON c.at = b.at
      LEFT JOIN finished f ON f.at = b.at
      LEFT JOIN started s ON s.at = b.at
      LEFT JOIN sampled m ON m.at = b.at
      ORDER BY b.at`;
    const gauge = (value: unknown) => (value === null || value === undefined ? null : Number(value));
    return rows.map((r) => ({
      at: r.at,
      created: r.created,
      finished: r.finished,
      submitToStartP50Ms: r.p50_ms === null ? null : Math.round(Number(r.p50_ms)),
      submitToStartP99Ms: r.p99_ms === null ? null : Math.round(Number(r.p99_ms)),
      queueDepth: gauge(r.queue_depth),
      waitingForWorker: gauge(r.waiting_for_worker),
      staleSteps: gauge(r.stale_steps),
      outboxBacklog: gauge(r.outbox_backlog),
      outboxOldestAgeMs: gauge(r.outbox_oldest_age_ms),
      outboxDead: gauge(r.outbox_dead),
      relayBacklog: gauge(r.relay_backlog),
      relayOldestAgeMs: gauge(r.relay_oldest_age_ms),
      relayDead: gauge(r.relay_dead),
      callbackBacklog: gauge(r.callback_backlog),
      callbackOldestAgeMs: gauge(r.callback_oldest_age_ms),
      callbackDead: gauge(r.callback_dead),
    }));
  }

  async has(minute: Date): Promise<boolean> {
    const [row] = await this.sql`SELECT 1 FROM metric_sample WHERE minute = ${minute}`;
    return row !== undefined;
  }

  async insert(s: MetricSample): Promise<boolean> {
    const written = await this.sql`
      INSERT INTO metric_sample (minute, sampled_at, queue_depth, waiting_for_worker, stale_steps,
        outbox_backlog, outbox_oldest_age_ms, outbox_dead, relay_backlog, relay_oldest_age_ms, relay_dead,
        callback_backlog, callback_oldest_age_ms, callback_dead)
      VALUES (${s.minute}, ${s.sampledAt}, ${s.queueDepth}, ${s.waitingForWorker}, ${s.staleSteps},
        ${s.outbox.backlog}, ${roundedMs(s.outbox.oldestAgeMs)}, ${s.outbox.dead},
        ${s.relay.backlog}, ${roundedMs(s.relay.oldestAgeMs)}, ${s.relay.dead},
        ${s.callbacks.backlog}, ${roundedMs(s.callbacks.oldestAgeMs)}, ${s.callbacks.dead})
      ON CONFLICT (minute) DO NOTHING`;
    return written.count === 1;
  }

  async deleteBefore(before: Date): Promise<number> {
    return (await this.sql`DELETE FROM metric_sample WHERE minute < ${before}`).count;
  }

  async queueDepth(): Promise<number> {
    const [row] = await this.sql<{ n: number }[]>`
      SELECT count(*)::int AS n FROM step WHERE status IN ('READY', 'QUEUED')`;
    return row?.n ?? 0;
  }
}

const roundedMs = (ms: number | null) => (ms === null ? null : Math.round(ms));

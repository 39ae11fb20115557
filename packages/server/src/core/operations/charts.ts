/**
 * The dashboard's charts (docs/dashboard.md): series over the last hour or day. Counts that the task
 * table can give for any past time (created, finished, submit→start) are read from it over time
 * buckets; gauges it cannot (backlogs, queue depth, DEAD, STALE) come from a sample written once a
 * minute by whichever replica gets there first, kept for a bounded time.
 */
import type { Clock } from '../shared/ports.ts';
import type { DashboardReads, PipelineRows } from './ports.ts';

export type ChartRange = 'hour' | 'day';

/** Each range's bucket: a minute over the hour, ten minutes over the day (144 points). */
export const chartRanges: Record<ChartRange, { bucketSeconds: number; buckets: number }> = {
  hour: { bucketSeconds: 60, buckets: 60 },
  day: { bucketSeconds: 600, buckets: 144 },
};

/** The buckets a range covers at `now`: `count` starts from `first`, the last one holding `now`. */
export interface ChartWindow {
  first: Date;
  /** Exclusive: the end of the bucket that holds `now`. */
  end: Date;
  bucketSeconds: number;
  count: number;
}

/** Buckets are aligned on the Unix epoch, so every replica and every read cuts time the same way. */
export function chartWindow(range: ChartRange, now: Date): ChartWindow {
  const { bucketSeconds, buckets } = chartRanges[range];
  const bucketMs = bucketSeconds * 1000;
  const end = Math.floor(now.getTime() / bucketMs) * bucketMs + bucketMs;
  return { first: new Date(end - buckets * bucketMs), end: new Date(end), bucketSeconds, count: buckets };
}

/** One bucket of the charts; a gauge is the highest sample in the bucket, null where none was taken. */
export interface ChartBucket {
  at: Date;
  created: number;
  finished: number;
  /** Submit→start of the tasks that started in the bucket (their first step's start). */
  submitToStartP50Ms: number | null;
  submitToStartP99Ms: number | null;
  queueDepth: number | null;
  waitingForWorker: number | null;
  staleSteps: number | null;
  outboxBacklog: number | null;
  outboxOldestAgeMs: number | null;
  outboxDead: number | null;
  relayBacklog: number | null;
  relayOldestAgeMs: number | null;
  relayDead: number | null;
  callbackBacklog: number | null;
  callbackOldestAgeMs: number | null;
  callbackDead: number | null;
}

/** One minute's gauges, as the sampler writes them. */
export interface MetricSample {
  minute: Date;
  sampledAt: Date;
  queueDepth: number;
  waitingForWorker: number;
  staleSteps: number;
  outbox: PipelineLine;
  relay: PipelineLine;
  callbacks: PipelineLine;
}

export interface ChartReads {
  /** Every bucket of the window, oldest first (a bucket without tasks or samples is still there). */
  buckets(window: ChartWindow, tenants: 'all' | string[]): Promise<ChartBucket[]>;
}

export interface MetricSamples {
  /** Whether the minute is sampled already (cheap: spares the gauges' reads). */
  has(minute: Date): Promise<boolean>;
  /** Writes the sample unless one for its minute exists; true if this call wrote it. */
  insert(sample: MetricSample): Promise<boolean>;
  /** Deletes the samples of minutes before `before`; how many. */
  deleteBefore(before: Date): Promise<number>;
  /** Steps ready to run and not started yet (READY or QUEUED). */
  queueDepth(): Promise<number>;
}

/** What the pipeline health page and the sampler count of one outbox-like table. */
export interface PipelineLine {
  backlog: number;
  dead: number;
  oldestAgeMs: number | null;
}

/** Waiting = claimable or claimed now; DEAD = gave up. Counted the way the metrics count them. */
export async function pipelineLine(rows: PipelineRows, now: Date): Promise<PipelineLine> {
  const { byStatus: counts, oldestAgeSeconds: oldestSeconds } = await rows.backlog(now);
  const waiting = (counts.PENDING ?? 0) + (counts.FAILED ?? 0) + (counts.PUBLISHING ?? 0);
  return { backlog: waiting, dead: counts.DEAD ?? 0, oldestAgeMs: waiting > 0 ? oldestSeconds * 1000 : null };
}

export interface ChartSamplerDeps {
  samples: MetricSamples;
  pipeline: { outbox: PipelineRows; realtime: PipelineRows; callbacks: PipelineRows };
  steps: Pick<DashboardReads, 'stepHealth'>;
  clock: Clock;
  /** Samples older than this are deleted. */
  retentionMs: number;
}

/**
 * One round of the sampler: writes this minute's sample if no replica has, and deletes what is past
 * the retention. Returns whether this round wrote the sample.
 */
export async function sampleMinute(deps: ChartSamplerDeps): Promise<boolean> {
  const now = deps.clock.now();
  const minute = new Date(Math.floor(now.getTime() / 60_000) * 60_000);
  await deps.samples.deleteBefore(new Date(now.getTime() - deps.retentionMs));
  if (await deps.samples.has(minute)) return false;
  const [outbox, relay, callbacks, steps, queueDepth] = await Promise.all([
    pipelineLine(deps.pipeline.outbox, now),
    pipelineLine(deps.pipeline.realtime, now),
    pipelineLine(deps.pipeline.callbacks, now),
    deps.steps.stepHealth(),
    deps.samples.queueDepth(),
  ]);
  return deps.samples.insert({
    minute,
    sampledAt: now,
    queueDepth,
    waitingForWorker: steps.queued.count,
    staleSteps: steps.staleSteps,
    outbox,
    relay,
    callbacks,
  });
}

/** The series of a range, column by column (the form chart libraries take): times in Unix seconds. */
/** The series of the range; task counts over `tenants` (the platform's gauges only for `all`). */
export async function chartSeries(
  deps: { charts: ChartReads; clock: Clock },
  range: ChartRange,
  tenants: 'all' | string[],
) {
  const now = deps.clock.now();
  const window = chartWindow(range, now);
  const buckets = await deps.charts.buckets(window, tenants);
  const column = <K extends keyof ChartBucket>(key: K) => buckets.map((bucket) => bucket[key]);
  return {
    range,
    bucketSeconds: window.bucketSeconds,
    from: window.first.toISOString(),
    to: window.end.toISOString(),
    now: now.toISOString(),
    times: buckets.map((bucket) => bucket.at.getTime() / 1000),
    series: {
      created: column('created'),
      finished: column('finished'),
      submitToStartP50Ms: column('submitToStartP50Ms'),
      submitToStartP99Ms: column('submitToStartP99Ms'),
      queueDepth: column('queueDepth'),
      waitingForWorker: column('waitingForWorker'),
      staleSteps: column('staleSteps'),
      outboxBacklog: column('outboxBacklog'),
      outboxOldestAgeMs: column('outboxOldestAgeMs'),
      outboxDead: column('outboxDead'),
      relayBacklog: column('relayBacklog'),
      relayOldestAgeMs: column('relayOldestAgeMs'),
      relayDead: column('relayDead'),
      callbackBacklog: column('callbackBacklog'),
      callbackOldestAgeMs: column('callbackOldestAgeMs'),
      callbackDead: column('callbackDead'),
    },
  };
}

export type ChartSeries = Awaited<ReturnType<typeof chartSeries>>;

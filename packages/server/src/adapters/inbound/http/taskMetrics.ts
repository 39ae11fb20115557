/**
 * Metrics beyond the HTTP and relay ones (docs/observability.md), chosen to show whether people see the
 * right state, not only whether the server is up:
 * submit→start and step durations (from committed task changes), the outbox, relay and callback
 * backlogs with their oldest age and DEAD rows, STALE steps, and commit→visible as browsers report it.
 */
import { Gauge, Histogram, type Registry } from 'prom-client';
import type { FactObserver } from '../../../core/facts/ports.ts';
import type { TaskState } from '../../../core/facts/records.ts';
import type { Backlog, BacklogReads, BacklogTable } from '../../../core/operations/ports.ts';

const tables: BacklogTable[] = ['outbox', 'realtime', 'callbacks'];

const latencyBuckets = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300];

export class TaskMetrics implements FactObserver {
  readonly submitToStart: Histogram;
  readonly stepDuration: Histogram<'status'>;
  readonly commitToVisible: Histogram;

  constructor(registry: Registry, reads: BacklogReads, now: () => Date) {
    this.submitToStart = new Histogram({
      name: 'tdp_task_submit_to_start_seconds',
      help: "Time from a task's creation to the start of its first step",
      buckets: latencyBuckets,
      registers: [registry],
    });
    this.stepDuration = new Histogram({
      name: 'tdp_step_duration_seconds',
      help: 'Time from the start of a step to its end, by the status it ended in',
      labelNames: ['status'] as const,
      buckets: [0.01, 0.1, 0.5, 1, 5, 15, 60, 300, 900, 3600, 4 * 3600],
      registers: [registry],
    });
    this.commitToVisible = new Histogram({
      name: 'tdp_state_commit_to_visible_seconds',
      help: 'Time from the commit of a state to a browser showing it (sampled reports of the client store)',
      buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers: [registry],
    });
    // One read per table per scrape, shared by its gauges.
    const reading = new Map<BacklogTable, Promise<Backlog>>();
    const backlog = (table: BacklogTable) => {
      let pending = reading.get(table);
      if (!pending) {
        pending = reads.backlog(table, now()).finally(() => reading.delete(table));
        reading.set(table, pending);
      }
      return pending;
    };
    const oldestAge = (table: BacklogTable) =>
      backlog(table).then(
        (b) => b.oldestAgeSeconds,
        () => Number.NaN,
      );
    new Gauge({
      name: 'tdp_backlog_rows',
      help: 'Rows of the outbox, realtime relay and callback tables not yet published, by status',
      labelNames: ['table', 'status'] as const,
      registers: [registry],
      async collect() {
        this.reset();
        for (const table of tables) {
          const { byStatus } = await backlog(table).catch(() => ({ byStatus: {} as Record<string, number> }));
          for (const status of ['PENDING', 'PUBLISHING', 'FAILED', 'DEAD'])
            this.labels(table, status).set(byStatus[status] ?? 0);
        }
      },
    });
    new Gauge({
      name: 'tdp_backlog_oldest_age_seconds',
      help: 'Age of the oldest row still to publish (not DEAD) of the outbox, realtime relay and callbacks',
      labelNames: ['table'] as const,
      registers: [registry],
      async collect() {
        for (const table of tables) this.labels(table).set(await oldestAge(table));
      },
    });
    // Older names for the outbox's and the relay's oldest age, kept for the alerts and dashboards that read
    // them (docs/alerts/); the same read as tdp_backlog_oldest_age_seconds.
    new Gauge({
      name: 'tdp_outbox_oldest_unpublished_age_seconds',
      help: 'Age of the oldest domain event not yet published',
      registers: [registry],
      async collect() {
        this.set(await oldestAge('outbox'));
      },
    });
    new Gauge({
      name: 'tdp_realtime_oldest_unpublished_age_seconds',
      help: 'Age of the oldest realtime projection not yet published',
      registers: [registry],
      async collect() {
        this.set(await oldestAge('realtime'));
      },
    });
    new Gauge({
      name: 'tdp_steps_stale',
      help: 'Running steps whose heartbeats stopped (health STALE)',
      registers: [registry],
      async collect() {
        this.set(await reads.staleSteps().catch(() => Number.NaN));
      },
    });
  }

  committed(before: TaskState | null, after: TaskState): void {
    const firstStart = after.steps.find((s) => s.startedAt);
    if (firstStart?.startedAt && !before?.steps.some((s) => s.startedAt))
      this.submitToStart.observe(seconds(after.task.createdAt, firstStart.startedAt));
    for (const step of after.steps) {
      if (!step.startedAt || !step.finishedAt) continue;
      const earlier = before?.steps.find((s) => s.id === step.id);
      if (earlier && !earlier.finishedAt)
        this.stepDuration.labels(step.status).observe(seconds(step.startedAt, step.finishedAt));
    }
  }
}

const seconds = (from: Date, to: Date) => Math.max(0, (to.getTime() - from.getTime()) / 1000);

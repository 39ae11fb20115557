/**
 * Operations: what operators do and see — drains and cordons (audited), dead letters requeued, bulk
 * cancels and retries run as resumable jobs, a task's state corrected, and the dashboard's reads and
 * pipeline charts (sampled every minute).
 */
import { Type } from 'typebox';
import { registerAuditRoutes } from '../../adapters/inbound/http/auditRoutes.ts';
import { registerDeadLetterRoutes } from '../../adapters/inbound/http/deadLetterRoutes.ts';
import { registerOperatorRoutes } from '../../adapters/inbound/http/operatorRoutes.ts';
import { registerOperatorTaskRoutes } from '../../adapters/inbound/http/operatorTaskRoutes.ts';
import { PostgresBulkJobStore } from '../../adapters/outbound/postgres/bulkJobStore.ts';
import { PostgresChartReads } from '../../adapters/outbound/postgres/chartReads.ts';
import { PostgresDashboardReads } from '../../adapters/outbound/postgres/dashboardReads.ts';
import { PostgresDeadLetters } from '../../adapters/outbound/postgres/deadLetterStore.ts';
import { PostgresOperatorStore } from '../../adapters/outbound/postgres/operatorStore.ts';
import { PostgresQueueReads } from '../../adapters/outbound/postgres/queueReads.ts';
import { type BulkJobDeps, type BulkJobRunnerDeps, runBulkJobRound } from '../../core/operations/bulkJobs.ts';
import { type ChartSamplerDeps, sampleMinute } from '../../core/operations/charts.ts';
import type { OperatorAudit } from '../../core/operations/ports.ts';
import type { RequeueDeps } from '../../core/operations/requeueDeadLetters.ts';
import type { OperatorActionDeps } from '../../core/workers/operatorActions.ts';
import { defineFeature } from '../../host/feature.ts';
import { setting, settingsSlice } from '../../host/settings.ts';
import { bulkTaskActions } from './bulkTaskActions.ts';

export interface Operations {
  actions: OperatorActionDeps;
  requeue: RequeueDeps;
  dashboardReads: PostgresDashboardReads;
  chartReads: PostgresChartReads;
  /** The queue page's fair-share reads. */
  queueReads: PostgresQueueReads;
  /** The operator audit, as the admin API and the dashboard read it. */
  audit: OperatorAudit;
}

declare module '../../host/provisions.ts' {
  interface Provisions {
    operations: Operations;
  }
}

const settings = settingsSlice(
  Type.Object({
    deadLetterRequeueLimit: setting.value({
      default: 1_000,
      description: 'Rows one dead-letter requeue that names no ids puts back at most (the oldest first).',
    }),
    bulkJobTaskLimit: setting.value({
      default: 10_000,
      description:
        'Tasks one bulk cancel or retry may match at most; a broader filter is refused (nothing started).',
    }),
    bulkJobBatchSize: setting.value({
      // Small rounds: each task is its own fact transaction, and the claim is renewed between rounds.
      default: 20,
      description:
        "Tasks a bulk job's loop handles per round (each in its own transaction), holding its claim.",
    }),
    bulkJobClaimMs: setting.value({
      default: 30_000,
      description:
        "How long a replica's claim on a bulk job lasts; after it another replica resumes from the cursor.",
    }),
    bulkJobPollMs: setting.value({
      default: 1_000,
      description: 'The bulk job loop looks for new or abandoned jobs at least this often.',
    }),
    chartSampleIntervalMs: setting.integer({
      env: 'TDP_CHART_SAMPLE_INTERVAL_MS',
      default: 15_000,
      description:
        "How often each replica looks whether this minute's chart sample is written (well under a minute).",
    }),
    chartSampleRetentionMs: setting.integer({
      env: 'TDP_CHART_SAMPLE_RETENTION_MS',
      // The day chart reads a day back; a second day spares an operator looking at yesterday a gap.
      default: 2 * 24 * 3600_000,
      description: 'Chart samples (docs/dashboard.md) older than this are deleted by the sampler.',
    }),
  }),
);

export const operationsFeature = defineFeature({
  name: 'operations',
  settings,
  start(host, settings) {
    const { clock, ids, sql } = host;
    const { workerDrain } = host.need('workers');
    const cancel = host.need('tasks').cancel;
    const audit = new PostgresOperatorStore(sql);
    const operations: Operations = {
      actions: { ...workerDrain, store: audit },
      requeue: {
        clock,
        deadLetters: new PostgresDeadLetters(sql),
        requeueLimit: settings.deadLetterRequeueLimit,
        // The table's loop in this process sends them now (another replica's finds them when it polls).
        requeued: (table) => host.loops.wake(table),
      },
      dashboardReads: new PostgresDashboardReads(sql),
      chartReads: new PostgresChartReads(sql),
      queueReads: new PostgresQueueReads(sql),
      audit,
    };
    host.provide('operations', operations);
    // Bulk cancel and retry: jobs started by the routes, run by the bulk job loop of any replica through
    // the tasks feature's own cancel and retry.
    const jobStore = new PostgresBulkJobStore(sql);
    const jobs: BulkJobDeps = {
      jobs: jobStore,
      clock,
      ids,
      taskLimit: settings.bulkJobTaskLimit,
      started: () => host.loops.wake('bulkJobs'),
    };
    const loops = () => {
      const runner: BulkJobRunnerDeps = {
        jobs: jobStore,
        actions: bulkTaskActions(cancel),
        clock,
        ids,
        batchSize: settings.bulkJobBatchSize,
        claimMs: settings.bulkJobClaimMs,
      };
      // Bulk jobs run on any replica, a job held by one claim at a time: woken when one is created here,
      // else looking every `bulkJobPollMs` for one created elsewhere or whose claim expired.
      const bulkJobLoop = host.loop({
        name: 'bulkJobs',
        maxIdleMs: settings.bulkJobPollMs,
        round: async () => ({ full: await runBulkJobRound(runner) }),
        nextDueAt: () => jobStore.nextDueAt(clock.now()),
      });
      // A job whose claim expires at a test clock's jump is taken over at once.
      clock.onJump?.(() => bulkJobLoop.wake());
      const { outbox } = host.need('events');
      const { rows: realtime } = host.need('realtime');
      const { queue: callbacks } = host.need('callbacks');
      const sampler: ChartSamplerDeps = {
        samples: operations.chartReads,
        pipeline: { outbox: outbox.rows, realtime, callbacks: callbacks.rows },
        steps: operations.dashboardReads,
        clock,
        retentionMs: settings.chartSampleRetentionMs,
      };
      // Each minute's gauge sample (the first replica to look writes it), looked for well under a minute.
      const chartSampler = host.loop({
        name: 'chart-sampler',
        maxIdleMs: settings.chartSampleIntervalMs,
        round: async () => {
          await sampleMinute(sampler);
          return { full: false };
        },
      });
      return [bulkJobLoop, chartSampler];
    };
    return {
      loops: host.settings.runLoops ? loops() : [],
      routes: async (app) => {
        const { gate, taskTenant } = host.need('operators');
        registerDeadLetterRoutes(app, { gate, requeue: operations.requeue });
        registerOperatorRoutes(app, { gate, actions: operations.actions });
        registerAuditRoutes(app, { path: '/admin/v1/audit', gate, audit });
        registerOperatorTaskRoutes(app, {
          gate,
          taskTenant,
          jobs,
          correct: {
            store: host.facts,
            clock,
            ids,
            signal: host.afterCommit,
            registries: host.need('definitions').registries,
          },
        });
      },
    };
  },
});

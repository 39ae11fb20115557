/**
 * Retention: finished tasks archived (when an archive directory is set) and done rows swept, table by
 * table, each within its window; an archived task's reads answer 410 with its tombstone.
 */
import { Type } from 'typebox';
import { FileArchive } from '../../adapters/outbound/archive/fileArchive.ts';
import { PostgresRetentionStore } from '../../adapters/outbound/postgres/retentionStore.ts';
import { type RetentionWindows, windowsProblem } from '../../core/retention/policy.ts';
import { type SweepDeps, sweepOnce } from '../../core/retention/sweep.ts';
import { defineFeature } from '../../host/feature.ts';
import { ConfigError, integerVariable, setting, settingsSlice } from '../../host/settings.ts';

export interface Retention {
  /** Tombstones of archived tasks (their reads answer 410). */
  archived: PostgresRetentionStore;
}

declare module '../../host/provisions.ts' {
  interface Provisions {
    retention: Retention;
  }
}

/** The retention windows (days, one per table) and the sweep's batch sizes and timings. */
export interface RetentionSettings extends RetentionWindows {
  /** Whether this process runs the sweep (`TDP_RETENTION_SWEEP=off` leaves it to other replicas). */
  sweep: boolean;
  /** Tasks archived in one batch at most. */
  archiveBatchTasks: number;
  /** Heap blocks (8 KiB) of each table one sweep round looks at. */
  scanBlocks: number;
  /** A batch whose files were written but whose rows were not deleted by then is taken over. */
  batchClaimMs: number;
  /** The sweep's pause once it has walked every table to its end. */
  sweepIntervalMs: number;
}

const defaultRetention: RetentionSettings = {
  sweep: true,
  taskDays: 30,
  // Published, delivered and fired rows are done; a week leaves time to look into an incident.
  outboxDays: 7,
  realtimeDays: 7,
  callbackDays: 7,
  // Must outlive the longest retry (windowsProblem checks it; about 4 h with outbox/policy.ts).
  idempotencyDays: 30,
  consumerInboxDays: 30,
  commandDays: 7,
  timerDays: 7,
  grantDays: 7,
  bulkJobDays: 30,
  archiveBatchTasks: 50,
  // 1 MiB of heap a round and table: a short transaction even on a full page of rows.
  scanBlocks: 128,
  batchClaimMs: 10 * 60_000,
  sweepIntervalMs: 10 * 60_000,
};

/** Each window's variable: `TDP_RETENTION_DAYS` for task history, `TDP_RETENTION_<TABLE>_DAYS` for the rest. */
const windowVariables: Record<keyof RetentionWindows, string> = {
  taskDays: 'TDP_RETENTION_DAYS',
  outboxDays: 'TDP_RETENTION_OUTBOX_DAYS',
  realtimeDays: 'TDP_RETENTION_REALTIME_DAYS',
  callbackDays: 'TDP_RETENTION_CALLBACK_DAYS',
  idempotencyDays: 'TDP_RETENTION_IDEMPOTENCY_DAYS',
  consumerInboxDays: 'TDP_RETENTION_CONSUMER_INBOX_DAYS',
  commandDays: 'TDP_RETENTION_COMMAND_DAYS',
  timerDays: 'TDP_RETENTION_TIMER_DAYS',
  grantDays: 'TDP_RETENTION_GRANT_DAYS',
  bulkJobDays: 'TDP_RETENTION_BULK_JOB_DAYS',
};

const windowDescriptions: Record<keyof RetentionWindows, string> = {
  taskDays: "A finished task's history (archived first when `TDP_ARCHIVE_DIR` is set).",
  outboxDays: 'Published domain events.',
  realtimeDays: 'Published realtime messages.',
  callbackDays: 'Delivered callbacks.',
  idempotencyDays: 'Answers kept for `Idempotency-Key` retries (must outlive the longest retry).',
  consumerInboxDays: 'Events a consumer has applied.',
  commandDays: 'Worker commands the worker acknowledged.',
  timerDays: 'Timers that fired.',
  grantDays: 'Expired access grants.',
  bulkJobDays: 'Finished bulk jobs.',
};

function retentionFrom(env: NodeJS.ProcessEnv): RetentionSettings {
  const retention = { ...defaultRetention };
  for (const [window, name] of Object.entries(windowVariables) as [keyof RetentionWindows, string][])
    retention[window] = integerVariable(env, name, defaultRetention[window]);
  const sweep = env.TDP_RETENTION_SWEEP?.trim().toLowerCase();
  if (sweep && sweep !== 'on' && sweep !== 'off')
    throw new ConfigError('TDP_RETENTION_SWEEP must be on or off');
  if (sweep) retention.sweep = sweep === 'on';
  return retention;
}

const settings = settingsSlice(
  Type.Object({
    retention: setting.custom<RetentionSettings>({
      variables: {
        TDP_RETENTION_SWEEP: {
          type: '`on` or `off`',
          default: 'on',
          description: '`off`: this replica leaves the retention sweep to the others.',
        },
        ...Object.fromEntries(
          (Object.entries(windowVariables) as [keyof RetentionWindows, string][]).map(([window, name]) => [
            name,
            { default: `${defaultRetention[window]}`, description: windowDescriptions[window] },
          ]),
        ),
      },
      typeName: 'days',
      default: defaultRetention,
      description:
        "Whether this replica sweeps (`off` leaves it to the others), and each table's window in days (docs/retention.md): task history 30, outbox, realtime, callbacks, commands, timers and grants 7, idempotency, consumer inbox and bulk jobs 30.",
      parse: (env) =>
        Object.keys(env).some((name) => name.startsWith('TDP_RETENTION_')) ? retentionFrom(env) : undefined,
    }),
    archiveDirectory: setting.optionalString({
      env: 'TDP_ARCHIVE_DIR',
      description:
        'Where finished tasks are archived before their rows are deleted; unset: task history is kept.',
    }),
  }),
  (settings) => {
    const problem = windowsProblem(settings.retention);
    if (problem) throw new ConfigError(`retention: ${problem}`);
  },
);

export const retentionFeature = defineFeature({
  name: 'retention',
  settings,
  start(host, settings) {
    const archived = new PostgresRetentionStore(host.sql);
    host.provide('retention', { archived });
    // `TDP_RETENTION_SWEEP=off`: this replica leaves the sweep to the others.
    if (!host.settings.runLoops || !settings.retention.sweep) return {};
    const { metrics } = host;
    const logger = host.logger.child({ loop: 'retention' });
    const sweep: SweepDeps = {
      store: archived,
      archive: settings.archiveDirectory ? new FileArchive(settings.archiveDirectory) : null,
      clock: host.clock,
      ids: host.ids,
      settings: settings.retention,
      observer: {
        swept: (table, rows) => metrics.retentionSwept.labels(table).inc(rows),
        archived: (table, rows) => metrics.retentionArchived.labels(table).inc(rows),
        oldestRowAge: (table, seconds) => metrics.retentionOldestRowAge.labels(table).set(seconds),
        failed: (reason, error) => {
          metrics.retentionFailures.labels(reason).inc();
          // An archive that cannot be written is an operator's problem (disk full, permissions): say so.
          logger.error({ err: error, reason }, 'retention sweep stopped; nothing was deleted in this batch');
        },
      },
    };
    /** The tables this replica has walked to their end in its current pass. */
    const walked = new Set<string>();
    // Rounds follow one another while some table's walk has not reached its end (a table walked to its
    // end waits for the others), then the sweep rests. A failed round backs off and deletes nothing.
    const loop = host.loop({
      name: 'retention',
      maxIdleMs: settings.retention.sweepIntervalMs,
      round: async () => {
        const report = await sweepOnce(sweep, walked);
        if (report.archivedTasks > 0 || Object.values(report.swept).some((n) => n > 0))
          logger.info({ report }, 'retention round');
        // Every table walked to its end: the pass is over, the next one starts after the rest.
        if (!report.more) walked.clear();
        return { full: report.more };
      },
    });
    return { loops: [loop] };
  },
});

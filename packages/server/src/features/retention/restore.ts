/** The retention sweep's dependencies: the store, the archive (when a directory is set) and its metrics. */
import type { Logger } from 'pino';
import type { Metrics } from '../adapters/inbound/http/metrics.ts';
import { FileArchive } from '../adapters/outbound/archive/fileArchive.ts';
import { connectDatabase } from '../adapters/outbound/postgres/database.ts';
import { PostgresRetentionStore } from '../adapters/outbound/postgres/retentionStore.ts';
import type { ServerConfig } from '../config.ts';
import type { RetentionObserver } from '../core/retention/ports.ts';
import { type RestoreReport, restoreTask } from '../core/retention/restore.ts';
import type { SweepDeps } from '../core/retention/sweep.ts';
import type { Clock, IdGenerator } from '../core/shared/ports.ts';

export function retentionObserver(metrics: Metrics, logger: Logger): RetentionObserver {
  return {
    swept: (table, rows) => metrics.retentionSwept.labels(table).inc(rows),
    archived: (table, rows) => metrics.retentionArchived.labels(table).inc(rows),
    oldestRowAge: (table, seconds) => metrics.retentionOldestRowAge.labels(table).set(seconds),
    failed: (reason, error) => {
      metrics.retentionFailures.labels(reason).inc();
      // An archive that cannot be written is an operator's problem (disk full, permissions): say so.
      logger.error({ err: error, reason }, 'retention sweep stopped; nothing was deleted in this batch');
    },
  };
}

export function retentionSweepDeps(
  config: ServerConfig,
  a: {
    retentionStore: PostgresRetentionStore;
    clock: Clock;
    ids: IdGenerator;
    metrics: Metrics;
    logger: Logger;
  },
): SweepDeps {
  return {
    store: a.retentionStore,
    archive: config.archiveDirectory ? new FileArchive(config.archiveDirectory) : null,
    clock: a.clock,
    ids: a.ids,
    observer: retentionObserver(a.metrics, a.logger),
    settings: config.retention,
  };
}

/**
 * `tdp archive restore --task <id>`: puts one archived task's rows back from TDP_ARCHIVE_DIR into
 * DATABASE_URL, exactly as they were archived (a row already there is kept).
 */
export async function restoreArchivedTask(
  options: { databaseUrl: string; archiveDirectory: string },
  taskId: string,
): Promise<RestoreReport> {
  const sql = connectDatabase({
    url: options.databaseUrl,
    maxConnections: 1,
    applicationName: 'tdp-restore',
  });
  try {
    return await restoreTask(
      { store: new PostgresRetentionStore(sql), archive: new FileArchive(options.archiveDirectory) },
      taskId,
    );
  } finally {
    await sql.end();
  }
}

/** `tdp archive restore`: one archived task's rows put back from the archive. */
import { FileArchive } from '../../adapters/outbound/archive/fileArchive.ts';
import { connectDatabase } from '../../adapters/outbound/postgres/database.ts';
import { PostgresRetentionStore } from '../../adapters/outbound/postgres/retentionStore.ts';
import { type RestoreReport, restoreTask } from '../../core/retention/restore.ts';

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

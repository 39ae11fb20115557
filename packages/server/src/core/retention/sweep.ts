/**
 * The retention sweep (docs/retention.md): one round archives one batch of finished tasks and sweeps
 * one block range of each delete-only table. Any number of replicas may run it: a batch's tasks are
 * claimed in the database, and each table's range is claimed by locking its cursor row.
 *
 * Archiving a batch: claim the tasks (a short transaction) → write the files (no transaction) → in the
 * transaction that deletes, read the files back and compare them with the rows as they are now; only
 * then delete. A crash before that commit leaves the rows and the claim; the claim expires and the next
 * sweeper writes the same batch's files again, so nothing is lost and nothing is archived twice.
 */
import type { Clock, IdGenerator } from '../shared/ports.ts';
import { archiveDay, cutoff, deleteOnlyTables, deletePolicies, type RetentionWindows } from './policy.ts';
import {
  type ArchiveBatch,
  ArchiveUnreadable,
  type ArchiveWriter,
  HistoryChanged,
  type RetentionObserver,
  type RetentionStore,
  type TableLines,
} from './ports.ts';

export interface SweepSettings extends RetentionWindows {
  /** Tasks archived in one batch at most. */
  archiveBatchTasks: number;
  /** Heap blocks of a table one round looks at (8 KiB each). */
  scanBlocks: number;
  /** A batch not deleted this long after its claim is taken over by another sweeper. */
  batchClaimMs: number;
}

export interface SweepDeps {
  store: RetentionStore;
  /** Null: no archive directory is configured, so task history is kept (the other tables are swept). */
  archive: ArchiveWriter | null;
  clock: Clock;
  ids: IdGenerator;
  observer: RetentionObserver;
  settings: SweepSettings;
}

export interface SweepReport {
  archivedTasks: number;
  swept: Record<string, number>;
  /** True while some table's walk has not reached its end: run again soon. */
  more: boolean;
}

/**
 * One round. An archive that cannot be written or read back stops the round before any delete.
 *
 * `walked` is the pass the round belongs to: the tables whose walk reached its end since the pass
 * began. They are left alone until every table has reached its end (`more` false: the caller rests and
 * starts a new pass); without it, a small table would be read again and again, a round at a time, while
 * a big one is still being walked.
 */
export async function sweepOnce(deps: SweepDeps, walked: Set<string> = new Set()): Promise<SweepReport> {
  const report: SweepReport = { archivedTasks: 0, swept: {}, more: false };
  if (deps.archive && !walked.has('task')) {
    const { archived, wrapped } = await archiveOneBatch(deps, deps.archive);
    report.archivedTasks = archived;
    // A full batch may have left tasks in its range: the walk looks at it again.
    if (wrapped && archived === 0) walked.add('task');
    else report.more = true;
  }
  const now = deps.clock.now();
  for (const policy of deletePolicies(deps.settings)) {
    if (walked.has(policy.table)) continue;
    try {
      const { deleted, wrapped } = await deps.store.sweepTable(policy, now, deps.settings.scanBlocks);
      report.swept[policy.table] = (report.swept[policy.table] ?? 0) + deleted;
      if (deleted > 0) deps.observer.swept(policy.table, deleted);
      if (wrapped) walked.add(policy.table);
      else report.more = true;
    } catch (error) {
      deps.observer.failed('SWEEP', error);
      throw error;
    }
  }
  const ages = await deps.store.oldestRowAges(['task', ...deleteOnlyTables], deps.clock.now());
  for (const [table, seconds] of Object.entries(ages)) deps.observer.oldestRowAge(table, seconds);
  return report;
}

async function archiveOneBatch(
  deps: SweepDeps,
  archive: ArchiveWriter,
): Promise<{ archived: number; wrapped: boolean }> {
  const now = deps.clock.now();
  const { batch, wrapped } = await deps.store.claimTaskBatch({
    batchId: deps.ids.newId(),
    claimId: deps.ids.newId(),
    archiveDay: archiveDay(now),
    now,
    finishedBefore: cutoff(now, deps.settings.taskDays),
    limit: deps.settings.archiveBatchTasks,
    scanBlocks: deps.settings.scanBlocks,
    claimedUntil: new Date(now.getTime() + deps.settings.batchClaimMs),
  });
  if (!batch) return { archived: 0, wrapped };
  const written = await deps.store.taskHistory(batch.taskIds);
  try {
    await archive.write(batch, written);
  } catch (error) {
    // Full disk, no permission, no directory: an alert, and the rows stay (the claim expires).
    deps.observer.failed('ARCHIVE', error);
    throw error;
  }
  try {
    const deleted = await deps.store.deleteArchived(batch, deps.clock.now(), (current) =>
      verifyAgainstArchive(archive, batch, current),
    );
    for (const { table, lines } of deleted)
      if (lines.length > 0) {
        deps.observer.archived(table, lines.length);
        deps.observer.swept(table, lines.length);
      }
    return { archived: batch.taskIds.length, wrapped };
  } catch (error) {
    if (error instanceof HistoryChanged) {
      // A retry or a late row arrived while the files were written: give the tasks back, try later.
      deps.observer.failed('CHANGED', error);
      await deps.store.releaseBatch(batch.batchId);
      return { archived: 0, wrapped };
    }
    deps.observer.failed('ARCHIVE', error);
    throw error;
  }
}

/** Reads the batch back (the writer checks counts and checksums) and compares it row for row. */
async function verifyAgainstArchive(
  archive: ArchiveWriter,
  batch: ArchiveBatch,
  current: TableLines[],
): Promise<void> {
  const { manifest, tables } = await archive.read(batch.archiveDay, batch.batchId);
  if (manifest.batchId !== batch.batchId || manifest.taskIds.join() !== batch.taskIds.join())
    throw new ArchiveUnreadable(`the manifest of batch ${batch.batchId} names other tasks`);
  const archived = new Map(tables.map((t) => [t.table, t.lines]));
  for (const { table, lines } of current) {
    const stored = archived.get(table) ?? [];
    if (stored.length !== lines.length || stored.some((line, i) => line !== lines[i]))
      throw new HistoryChanged(`${table} of batch ${batch.batchId} changed since it was archived`);
  }
}

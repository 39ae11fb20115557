/** The ports of the retention sweep (sweep.ts) and of `tdp archive restore` (restore.ts). */
import type { ArchivedTable, DeletePolicy, TaskHistoryTable } from './policy.ts';

/** One table's rows of a batch: each line one row as JSON (PostgreSQL's `row_to_json`), in key order. */
export interface TableLines {
  table: TaskHistoryTable;
  lines: string[];
}

/** A batch of finished tasks being archived; its files are named by `batchId` under `archiveDay`. */
export interface ArchiveBatch {
  batchId: string;
  /** This sweeper's claim on the batch (another sweeper that takes it over gets a new one). */
  claimId: string;
  archiveDay: string;
  taskIds: string[];
}

/** What a batch's manifest says: per table, the row count and the checksum of its content. */
export interface ArchiveManifest {
  batchId: string;
  archiveDay: string;
  taskIds: string[];
  tables: ArchivedTable[];
}

/**
 * Where archived history goes (a directory today, an S3-compatible store later). `write` replaces any
 * earlier files of the same batch (a rerun after a crash); `read` checks every file against the
 * manifest (count and checksum) and throws `ArchiveUnreadable` when one does not match.
 */
export interface ArchiveWriter {
  write(batch: ArchiveBatch, tables: TableLines[]): Promise<ArchiveManifest>;
  read(archiveDay: string, batchId: string): Promise<{ manifest: ArchiveManifest; tables: TableLines[] }>;
}

/** The archive could not be written or read back as written: nothing may be deleted. */
export class ArchiveUnreadable extends Error {
  override readonly name = 'ArchiveUnreadable';
}

/** The rows as they are now differ from the archived ones (not the archive's fault): try the tasks later. */
export class HistoryChanged extends Error {
  override readonly name = 'HistoryChanged';
}

export interface RetentionStore {
  /**
   * A batch to archive: an earlier one whose sweeper died (its claim expired), taken over; else up to
   * `limit` finished tasks from the next block range of the task table, claimed for a new batch until
   * `claimedUntil`. `wrapped` is true once the walk went past the end of the table.
   */
  claimTaskBatch(request: {
    batchId: string;
    claimId: string;
    archiveDay: string;
    now: Date;
    finishedBefore: Date;
    limit: number;
    scanBlocks: number;
    claimedUntil: Date;
  }): Promise<{ batch: ArchiveBatch | null; wrapped: boolean }>;
  /** Every row of the tasks' history, read outside any transaction. */
  taskHistory(taskIds: string[]): Promise<TableLines[]>;
  /**
   * In one transaction: checks the claim is still this sweeper's, locks the tasks, reads their history again and hands it to `verify` (which
   * throws when it is not what the archive holds), then deletes exactly those rows, leaves a
   * tombstone per task and ends the batch. Returns the rows deleted per table.
   */
  deleteArchived(
    batch: ArchiveBatch,
    now: Date,
    verify: (current: TableLines[]) => Promise<void>,
  ): Promise<TableLines[]>;
  /** Gives a batch's tasks back (their history changed while it was written); they are retried later. */
  releaseBatch(batchId: string): Promise<void>;
  /** Deletes the done rows of the next block range of the policy's table. */
  sweepTable(
    policy: DeletePolicy,
    now: Date,
    scanBlocks: number,
  ): Promise<{ deleted: number; wrapped: boolean }>;
  /** Age in seconds of the oldest row of each table (for the oldest-row gauge). */
  oldestRowAges(tables: string[], now: Date): Promise<Record<string, number>>;
  /** Puts archived rows back (a row already there is kept) and removes the tasks' tombstones. */
  restore(tables: TableLines[], taskIds: string[]): Promise<Record<string, number>>;
  /** The batch that archived a task, from its tombstone. */
  archivedTask(taskId: string): Promise<{ batchId: string; archiveDay: string } | null>;
}

/** What the sweep reports, for metrics and alerts. */
export interface RetentionObserver {
  swept(table: string, rows: number): void;
  archived(table: string, rows: number): void;
  oldestRowAge(table: string, seconds: number): void;
  failed(reason: 'ARCHIVE' | 'CHANGED' | 'SWEEP', error: unknown): void;
}

/** Tombstones of archived tasks, for reads that must answer 410 instead of 404. */
export interface ArchivedTasks {
  find(taskId: string): Promise<ArchivedTaskTombstone | null>;
}

export interface ArchivedTaskTombstone {
  taskId: string;
  applicationId: string;
  tenantId: string;
  ownerId: string | null;
  batchId: string;
  archiveDay: string;
}

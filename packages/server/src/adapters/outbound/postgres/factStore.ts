/**
 * The fact store: runs a fact session's transaction and commits its write set. What each table's rows
 * look like, and the statements that write them, live in the table files (taskTables, stepTables,
 * attemptTables, eventTables, outboxTables, workerCommandTables, schedulingTables); the reads a fact
 * makes inside its transaction in transactionReads.
 */

import {
  type Arrival,
  type ArrivalTags,
  type DeferredRequest,
  type FactTransaction,
  KeyTakenError,
  type TaggedRequest,
  type TaskKeySlot,
  type TaskKeySlotKind,
  type VirtualTimes,
} from '../../../core/facts/ports.ts';
import type { SignalRecord } from '../../../core/facts/records.ts';
import type { FactWriteSet } from '../../../core/facts/writeSet.ts';
import type { HandleHeartbeat, HeartbeatUpdate, StatusStore } from '../../../core/status/ports.ts';
import {
  attemptByHandle,
  attemptById,
  attemptsByHandle,
  attemptsById,
  pushAttemptStatements,
} from './attemptTables.ts';
import { pushOperatorAuditStatements } from './auditTables.ts';
import { holdConcurrency, pushConcurrencyReleaseStatements } from './concurrencyTables.ts';
import { isUniqueViolation, type Queryable, type Sql, type TxSql, transaction } from './database.ts';
import { findStepDecisions, pushDecisionStatements } from './decisionTables.ts';
import {
  findDedup,
  findDedups,
  findIdempotency,
  pushEventStatements,
  pushIdempotencyStatement,
} from './eventTables.ts';
import { schedulingArrivals, schedulingTurns, writeArrivalTags, writeTurns } from './fairShareTables.ts';
import { GroupCommit } from './groupCommit.ts';
import { overdueTasks, pushLeaseStatements, renewLeases, renewLeasesByHandle } from './leaseTables.ts';
import {
  allMapItems,
  mapItemsAt,
  pendingMapItems,
  pushMapItemStatements,
  runningMapAttempts,
} from './mapItemTables.ts';
import { mergeWrites } from './mergeWrites.ts';
import { pushNotificationStatements } from './notificationTables.ts';
import { pushCallbackStatements, pushOutboxStatements } from './outboxTables.ts';
import { dropHeldSlots, takeRateTokens } from './rateLimitTables.ts';
import { type RowStatement, runAll } from './recordset.ts';
import { runAgain } from './runAgain.ts';
import {
  deferSchedulingRequests,
  pushReopenedRequestStatements,
  pushSchedulingRequestStatements,
  pushTimelineStatements,
  pushTimerStatements,
} from './schedulingTables.ts';
import { insertSignal, takeSignal } from './signalTables.ts';
import { probeAttempts, pushStepStatements } from './stepTables.ts';
import {
  lockTaskKeySlot,
  pushSingletonReleaseStatements,
  setTaskKeySlot,
  takeSingleton,
} from './taskKeyTables.ts';
import { pushTaskStatements } from './taskTables.ts';
import {
  aclOf,
  advisoryLocks,
  countRegistrationsSince,
  findTaskIdByClientKey,
  findWorkflowByKey,
  lockTask,
  lockTaskIfFree,
  lockTasks,
  lockWorkerCapacity,
  lockWorkflow,
  lockWorkflows,
} from './transactionReads.ts';
import { pushWorkerCommandStatements } from './workerCommandTables.ts';

/**
 * Opens a status transaction. Its statements find rows by key, so each is planned once per connection
 * (a generic plan) instead of at every execution: for `= ANY($1)` over a batch's ids PostgreSQL
 * otherwise re-plans each time, and planning cost more than running. Sequential scans are ruled out
 * because a generic plan made while a table is new (no statistics yet) would scan it whole for as long
 * as the plan is kept; with them off, every key lookup plans as an index scan from the start.
 */
export const beginStatusTransaction =
  'BEGIN; SET LOCAL plan_cache_mode = force_generic_plan; SET LOCAL enable_seqscan = off';

class PostgresFactTransaction implements FactTransaction {
  private readonly atCommit: FactWriteSet[] = [];

  /**
   * `tx` is the open transaction, or null for a write-only one: it may not read, and its writes go out
   * through `writer` as one statement, atomic on its own.
   */
  constructor(
    private readonly tx: TxSql | null,
    private readonly writer: Queryable,
  ) {}

  private get sql(): TxSql {
    if (!this.tx) throw new Error('a write-only transaction cannot read');
    return this.tx;
  }

  writeAtCommit(writes: FactWriteSet[]): void {
    this.atCommit.push(...writes);
  }

  /** Starts the writes kept for the commit; the caller sends COMMIT right behind them. */
  sendAtCommit(): Promise<unknown> | null {
    return this.atCommit.length > 0 ? this.send(this.atCommit.splice(0)) : null;
  }

  /** The writes kept for the commit of a write-only transaction (they go out with a group). */
  takeAtCommit(): FactWriteSet[] {
    return this.atCommit.splice(0);
  }

  schedulingArrivals(limit: number) {
    return schedulingArrivals(this.sql, limit);
  }

  writeArrivalTags(arrivals: Arrival[], tags: ArrivalTags[], lastTags: Map<string, number>) {
    return writeArrivalTags(this.sql, arrivals, tags, lastTags);
  }

  schedulingTurns(now: Date, limit: number, options: { untriedOnly: boolean }) {
    return schedulingTurns(this.sql, now, limit, options.untriedOnly);
  }

  writeTurns(retagged: TaggedRequest[], served: VirtualTimes | null) {
    return writeTurns(this.sql, retagged, served);
  }

  async deferSchedulingRequests(requests: DeferredRequest[], availableAt: Date) {
    await deferSchedulingRequests(this.sql, requests, availableAt);
  }

  holdConcurrency(hold: Parameters<FactTransaction['holdConcurrency']>[0]) {
    return holdConcurrency(this.sql, hold);
  }

  takeRateTokens(take: Parameters<FactTransaction['takeRateTokens']>[0]) {
    return takeRateTokens(this.sql, take);
  }

  dropHeldSlots(stepId: string, itemIndex: number | undefined, at: Date) {
    return dropHeldSlots(this.sql, stepId, itemIndex, at);
  }

  async schedulingReasons(stepId: string) {
    const [row] = await this.sql<{ reasons: string[] }[]>`
      SELECT reasons FROM scheduling_request WHERE step_id = ${stepId} AND status = 'PENDING'`;
    return row?.reasons ?? [];
  }

  lockTaskKeySlot(kind: TaskKeySlotKind, applicationId: string, key: string) {
    return lockTaskKeySlot(this.sql, kind, applicationId, key);
  }

  takeSingleton(applicationId: string, key: string, taskId: string, at: Date) {
    return takeSingleton(this.sql, applicationId, key, taskId, at);
  }

  setTaskKeySlot(kind: TaskKeySlotKind, applicationId: string, key: string, slot: TaskKeySlot, at: Date) {
    return setTaskKeySlot(this.sql, kind, applicationId, key, slot, at);
  }

  async advisoryLocks(keys: string[]) {
    return advisoryLocks(this.sql, keys);
  }

  async lockWorkerCapacity(workerIds: string[], mode: 'all' | 'firstFree') {
    return lockWorkerCapacity(this.sql, workerIds, mode);
  }

  async lockTask(taskId: string) {
    return lockTask(this.sql, taskId);
  }

  async lockTaskIfFree(taskId: string) {
    return lockTaskIfFree(this.sql, taskId);
  }

  async lockTasks(taskIds: string[], options: { workflows?: boolean } = {}) {
    return lockTasks(this.sql, taskIds, options);
  }

  async lockWorkflows(workflowIds: string[]) {
    return lockWorkflows(this.sql, workflowIds);
  }

  async lockWorkflow(workflowId: string) {
    return lockWorkflow(this.sql, workflowId);
  }

  async findWorkflowByKey(applicationId: string, key: string) {
    return findWorkflowByKey(this.sql, applicationId, key);
  }

  async findTaskIdByClientKey(workflowId: string, clientTaskKey: string) {
    return findTaskIdByClientKey(this.sql, workflowId, clientTaskKey);
  }

  async findDedup(eventId: string) {
    return findDedup(this.sql, eventId);
  }

  async findDedups(eventIds: string[]) {
    return findDedups(this.sql, eventIds);
  }

  async findAttempt(attemptId: string) {
    return attemptById(this.sql, attemptId);
  }

  async findAttemptByHandle(handleHash: Buffer) {
    return attemptByHandle(this.sql, handleHash);
  }

  findAttemptsByHandle(hashes: Buffer[]) {
    return attemptsByHandle(this.sql, hashes);
  }

  pendingMapItems(stepId: string, limit: number) {
    return pendingMapItems(this.sql, stepId, limit);
  }

  mapItemsAt(stepId: string, indexes: number[]) {
    return mapItemsAt(this.sql, stepId, indexes);
  }

  allMapItems(stepId: string) {
    return allMapItems(this.sql, stepId);
  }

  runningMapAttempts(stepIds: string[]) {
    return runningMapAttempts(this.sql, stepIds);
  }

  async acl(taskId: string) {
    return aclOf(this.sql, taskId);
  }

  async countRegistrationsSince(taskId: string, since: Date) {
    return countRegistrationsSince(this.sql, taskId, since);
  }

  async findIdempotency(principal: string, operation: string, key: string) {
    return findIdempotency(this.sql, principal, operation, key);
  }

  async findStepDecisions(taskId: string, decidedBy: string) {
    return findStepDecisions(this.sql, taskId, decidedBy);
  }

  async insertSignal(signal: SignalRecord, consumed: { stepId: string; at: Date } | null) {
    await insertSignal(this.sql, signal, consumed);
  }

  async takeSignal(taskId: string, name: string, stepId: string, at: Date) {
    return takeSignal(this.sql, taskId, name, stepId, at);
  }

  // Written at once: only inside a transaction (a write-only one writes at commit, or not at all).
  async write(w: FactWriteSet): Promise<void> {
    await this.writeAll([w]);
  }

  async writeAll(writes: FactWriteSet[]): Promise<void> {
    const sql = this.sql;
    const statements = factStatements(writes);
    if (statements.length > 0) await runAll(sql, statements);
  }

  /** Starts the statement that applies `writes` (one, whatever the tables) without waiting for it. */
  private send(writes: FactWriteSet[]): Promise<unknown> {
    const statements = factStatements(writes);
    return statements.length > 0 ? runAll(this.writer, statements).execute() : Promise.resolve();
  }
}

/** The statements that apply `writes`: one per table, each row once, in its last state. */
export function factStatements(writes: FactWriteSet[]): RowStatement[] {
  const w = mergeWrites(writes);
  // Revocations carry the time of the first fact (the injected clock).
  const committedAt = w.events[0]?.receivedAt ?? null;
  const statements: RowStatement[] = [];
  pushIdempotencyStatement(w, statements);
  pushTaskStatements(w, statements);
  pushStepStatements(w, statements);
  pushLeaseStatements(w, statements);
  pushConcurrencyReleaseStatements(w, statements);
  pushSingletonReleaseStatements(w, statements);
  pushAttemptStatements(w, committedAt, statements);
  pushEventStatements(w, statements);
  pushOutboxStatements(w, statements);
  pushSchedulingRequestStatements(w, statements);
  pushReopenedRequestStatements(w, statements);
  pushMapItemStatements(w, statements);
  pushWorkerCommandStatements(w, statements);
  pushTimerStatements(w, statements);
  pushCallbackStatements(w, statements);
  pushTimelineStatements(w, statements);
  pushDecisionStatements(w, statements);
  pushOperatorAuditStatements(w, statements);
  pushNotificationStatements(w, statements);
  return statements;
}

/** Whether a transaction's commit (its writes, or COMMIT) has been sent: from then its outcome is unknown. */
interface CommitProgress {
  committing: boolean;
}

/**
 * Where a fact transaction's time goes: `queue` waiting for a pooled connection, `work` from then to the
 * end of the use case's reads and decisions, `commit` its writes and COMMIT (a write-only one has only
 * `commit`). Its end is when the change is committed, the start of everything realtime measures after.
 */
export type TransactionPhase = 'queue' | 'work' | 'commit';
export type TransactionObserver = (phase: TransactionPhase, seconds: number) => void;

/** The fact store, with the heartbeat path's reads and lease renewals that run outside a transaction. */
export class PostgresFactStore implements StatusStore {
  /** Write-only transactions that arrive together commit as one statement. */
  private readonly writeOnlyGroup: GroupCommit;

  /** `heartbeatSql`: the pool heartbeats renew leases on (`leaseTables.ts` `heartbeatSession`). */
  constructor(
    private readonly sql: Sql,
    private readonly heartbeatSql: Sql = sql,
    private readonly observe: TransactionObserver = () => {},
  ) {
    this.writeOnlyGroup = new GroupCommit((writes) => {
      const statements = factStatements(writes);
      return statements.length > 0 ? runAll(this.sql, statements).execute() : Promise.resolve();
    });
  }

  async renewLeases(updates: HeartbeatUpdate[], now: Date): Promise<Set<string>> {
    return renewLeases(this.heartbeatSql, updates, now);
  }

  renewLeasesByHandle(applicationId: string, beats: HandleHeartbeat[], now: Date) {
    return renewLeasesByHandle(this.heartbeatSql, applicationId, beats, now);
  }

  async probeAttempts(attemptIds: string[]) {
    return probeAttempts(this.sql, attemptIds);
  }

  attemptsByHandle(hashes: Buffer[]) {
    return attemptsByHandle(this.sql, hashes);
  }

  async attemptsById(ids: string[]) {
    return attemptsById(this.sql, ids);
  }

  async overdueTasks(now: Date, limit: number) {
    return overdueTasks(this.sql, now, limit);
  }

  async transaction<T>(
    work: (tx: FactTransaction) => Promise<T>,
    options: { writeOnly?: boolean } = {},
  ): Promise<T> {
    let connectionsLost = 0;
    for (let attempt = 1; ; attempt += 1) {
      const progress: CommitProgress = { committing: false };
      try {
        return await (options.writeOnly ? this.writeOnly(work, progress) : this.once(work, progress));
      } catch (error) {
        if (isUniqueViolation(error)) throw new KeyTakenError({ cause: error });
        const again = runAgain(error, { attempt, connectionsLost, committing: progress.committing });
        if (again === 'no') throw error;
        if (again === 'on another connection') connectionsLost += 1;
      }
    }
  }

  /**
   * One transaction in two round trips: BEGIN goes out with the first reads, and the writes the session
   * kept for the commit go out as one statement with COMMIT right behind it. If that statement fails,
   * the transaction is aborted and COMMIT rolls it back (PostgreSQL answers ROLLBACK, not an error), so
   * its own failure is awaited after.
   */
  private async once<T>(work: (tx: FactTransaction) => Promise<T>, progress: CommitProgress): Promise<T> {
    let last: Promise<unknown> | null = null;
    const asked = performance.now();
    let connected = asked;
    let worked = asked;
    const value = await transaction(
      this.sql,
      async (sql) => {
        connected = performance.now();
        const tx = new PostgresFactTransaction(sql, sql);
        const result = await work(tx);
        worked = performance.now();
        progress.committing = true;
        last = tx.sendAtCommit();
        // Observed below, once COMMIT has answered.
        last?.catch(() => {});
        return result;
      },
      beginStatusTransaction,
    );
    if (last) await last;
    this.observe('queue', (connected - asked) / 1000);
    this.observe('work', (worked - connected) / 1000);
    this.observe('commit', (performance.now() - worked) / 1000);
    return value;
  }

  /**
   * No BEGIN, no COMMIT: the writes are one statement, so one round trip (a create's), shared with the
   * write-only transactions that arrive at the same time (groupCommit.ts).
   */
  private async writeOnly<T>(
    work: (tx: FactTransaction) => Promise<T>,
    progress: CommitProgress,
  ): Promise<T> {
    const tx = new PostgresFactTransaction(null, this.sql);
    const value = await work(tx);
    const sent = performance.now();
    progress.committing = true;
    const writes = tx.takeAtCommit();
    if (writes.length > 0) await this.writeOnlyGroup.commit(writes);
    this.observe('commit', (performance.now() - sent) / 1000);
    return value;
  }
}

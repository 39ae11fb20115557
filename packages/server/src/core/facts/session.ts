/**
 * The facts kernel: the one write path every context uses, and that uses no context.
 *
 * Glossary
 * - fact: an accepted event; it gets the next task version (and step version), a row in the immutable
 *   event log, a dedup record, an outbox event and realtime projections — all in one transaction.
 * - task / execution / step: the durable request, one run of it with a frozen definition, one DAG node
 *   of that run (records.ts); their state machines are stateMachine.ts and execution.ts.
 * - write set: every row one fact writes, table by table (writeSet.ts); the store sends it in one round.
 * - fact session: one transaction's view of the facts it commits — locked tasks, dedup records and
 *   attempts read once, deferred writes, and what the background loops must be woken for.
 * - coordinator: the application that owns the task; only it ends a task (TASK_COMPLETED / TASK_FAILED).
 *   Inside TDP, core/orchestration/consequences.ts decides the consequences of a fact and writes them into
 *   the same session.
 *
 * Every fact — a producer's event, the coordinator's end of
 * a task, a creation, an activation, a registration, a health change — is committed through
 * `FactSession.commit` inside one transaction: the new current state, the next task version, the
 * immutable event, the dedup record, the domain outbox event and the realtime projections together.
 * Workflow aggregates are applied last (`finish`), in workflow-id order, after every task lock is held,
 * so concurrent transactions always lock tasks before workflows and cannot deadlock on them.
 */
import type { EventResult, LifecycleStatus } from '@tdp/protocol';
import type { Clock, IdGenerator, Tracing } from '../shared/ports.ts';
import { notificationsFor } from './notifications.ts';
import { outboxFor } from './outboxEvents.ts';
import type {
  CommittedWork,
  FactObserver,
  FactStore,
  FactTransaction,
  OutboxSignal,
  RealtimeHandoffMode,
} from './ports.ts';
import {
  type ChannelNotice,
  noticeFor,
  progressOnly,
  taskProjections,
  workflowAfterTaskChange,
  workflowProjection,
} from './projections.ts';
import type {
  AttemptRecord,
  DedupRecord,
  RealtimeRecord,
  StatusDefinition,
  TaskEventRecord,
  TaskState,
  WorkflowRecord,
} from './records.ts';
import { familyTimers } from './taskFamily.ts';
import type { FactWriteSet } from './writeSet.ts';

export interface EventDraft {
  id: string;
  type: string;
  producer: string;
  payload: Record<string, unknown>;
  occurredAt: Date;
  receivedAt: Date;
  stepKey?: string | null;
  stepAttempt?: number | null;
  attemptId?: string | null;
  stepVersion?: bigint | null;
  operationCode?: string | null;
  sourceSeq?: number | null;
  phaseCode?: string | null;
  dataSchema?: string | null;
  errorCode?: string | null;
  durationMs?: number | null;
}

export interface CommitOptions {
  /** Extra rows of the same fact (new steps, credentials, idempotency, …). */
  write?: Omit<FactWriteSet, 'events' | 'outbox' | 'realtime' | 'dedup'>;
  /** More projections committed with this fact (e.g. a workflow created with it). */
  extraRealtime?: RealtimeRecord[];
  /** Record the answer under the event id, so a retry gets it back. */
  dedupHash?: string;
  statusDefinition?: StatusDefinition | null;
  /** False when the task was counted in a workflow created in this same transaction. */
  countInWorkflow?: boolean;
  /** A notice for some summary channels only (an approval's approvers), in place of the usual one. */
  channelNotice?: ChannelNotice;
}

export function eventResult(state: TaskState, event: TaskEventRecord, committedAt: Date): EventResult {
  return {
    accepted: true,
    duplicate: false,
    stale: false,
    eventId: event.id,
    taskId: state.task.id,
    stepKey: event.stepKey,
    stepId: event.stepKey,
    operationCode: event.operationCode,
    taskVersion: state.task.version.toString(),
    stepVersion: event.stepVersion?.toString() ?? null,
    lifecycleStatus: state.task.lifecycleStatus,
    businessStatus: state.task.businessStatus,
    committedAt: committedAt.toISOString(),
  };
}

export interface FactDeps {
  store: FactStore;
  clock: Clock;
  ids: IdGenerator;
  signal: OutboxSignal;
  /** Spans (docs/observability.md); absent: no tracing. */
  tracing?: Tracing;
  /** Told of every committed task change (metrics); absent: nobody listens. */
  observer?: FactObserver;
}

export interface SessionOptions {
  /**
   * Batch mode: facts are kept and written together when the transaction finishes, as one statement
   * per table with each row in its last state. Reads inside the session see the deferred facts (task
   * states and dedup records are served from the session), so a batch behaves as if written one by one.
   */
  deferWrites?: boolean;
  /** With deferWrites, for work that reads nothing (a create): no BEGIN or COMMIT, one round trip. */
  writeOnly?: boolean;
  /** See `OutboxSignal.realtimeHandoff` (set from the deps by `inFactTransaction`). */
  realtimeHandoff?: RealtimeHandoffMode;
  /** See `OutboxSignal.domainEvents` (set from the deps by `inFactTransaction`). */
  domainEvents?: boolean;
}

export class FactSession {
  private readonly workflowChanges = new Map<
    string,
    { from: LifecycleStatus | null; to: LifecycleStatus }[]
  >();
  /** Tasks locked in this transaction, as of their last committed fact (no second read). */
  private readonly locked = new Map<string, TaskState>();
  private readonly pending: FactWriteSet[] = [];
  /** The realtime_outbox row of this transaction's realtime records, once it has one. */
  private realtimeOutboxId: string | null = null;
  /** Workflows a batch locked with its tasks (`prefetch`), as of the transaction's start. */
  private readonly lockedWorkflows = new Map<string, WorkflowRecord>();
  /** Dedup records of this session's facts, and those read ahead for a batch (null: not seen). */
  private readonly dedup = new Map<string, DedupRecord | null>();
  private readonly attempts = new Map<string, AttemptRecord>();
  /** Attempts by execution-handle hash (hex), as `resolveHandles` read them (null: none). */
  private readonly handles = new Map<string, AttemptRecord | null>();
  /** Steps this session asked the scheduler to place and did not place itself. */
  private readonly requestedSteps = new Set<string>();
  /** Work for after the commit (e.g. waking the workers a placement wrote commands for). */
  readonly committedCallbacks: (() => void)[] = [];
  /** The task changes this session committed, in order (for the fact observer). */
  readonly changes: { before: TaskState | null; after: TaskState }[] = [];
  /** What this transaction wrote for the background loops (woken after the commit). */
  readonly wrote: CommittedWork = {
    outbox: false,
    scheduling: false,
    callbacks: false,
    notifications: false,
    earliestTimer: null,
    commandsFor: [],
    capacityFreed: false,
    realtime: [],
  };

  constructor(
    readonly tx: FactTransaction,
    private readonly ids: IdGenerator,
    readonly now: Date,
    private readonly options: SessionOptions = {},
  ) {}

  /** The task, locked until the transaction ends; read once per transaction. */
  async lockTask(taskId: string): Promise<TaskState | null> {
    const known = this.locked.get(taskId);
    if (known) return known;
    const state = await this.tx.lockTask(taskId);
    if (state) this.locked.set(taskId, state);
    return state;
  }

  /**
   * Locks a batch's tasks (in id order, so concurrent batches cannot deadlock on them) and reads the
   * dedup records of its events, in one round trip.
   */
  async prefetch(
    taskIds: string[],
    eventIds: string[] = [],
    options: { workflows?: boolean } = {},
  ): Promise<void> {
    const wanted = [...new Set(taskIds)].filter((id) => !this.locked.has(id)).sort();
    const unseen = [...new Set(eventIds)].filter((id) => !this.dedup.has(id));
    const [locked, records] = await Promise.all([
      wanted.length > 0 ? this.tx.lockTasks(wanted, options) : { tasks: [], workflows: [] },
      unseen.length > 0 ? this.tx.findDedups(unseen) : [],
    ]);
    for (const state of locked.tasks) this.locked.set(state.task.id, state);
    for (const workflow of locked.workflows) this.lockedWorkflows.set(workflow.id, workflow);
    for (const id of unseen) this.dedup.set(id, null);
    for (const record of records) this.dedup.set(record.eventId, record);
  }

  async findDedup(eventId: string): Promise<DedupRecord | null> {
    const known = this.dedup.get(eventId);
    if (known !== undefined) return known;
    return this.tx.findDedup(eventId);
  }

  /** Attempt rows the caller already read (e.g. the worker inbox), served without a second read. */
  rememberAttempts(attempts: AttemptRecord[]): void {
    for (const attempt of attempts) this.attempts.set(attempt.id, attempt);
  }

  async findAttempt(attemptId: string): Promise<AttemptRecord | null> {
    return this.attempts.get(attemptId) ?? this.tx.findAttempt(attemptId);
  }

  /**
   * Resolves a batch's execution handles in one read, so their tasks can be locked with the others
   * instead of one round trip per event for the handle and one for the lock. Returns each hash's
   * attempt (null: none); `findAttemptByHandle` serves them afterwards.
   */
  async resolveHandles(hashes: Buffer[]): Promise<(AttemptRecord | null)[]> {
    const keys = hashes.map((h) => h.toString('hex'));
    const unseen = hashes.filter((_, i) => !this.handles.has(keys[i]!));
    if (unseen.length > 0) {
      const found = await this.tx.findAttemptsByHandle(unseen);
      for (const hash of unseen) this.handles.set(hash.toString('hex'), null);
      for (const attempt of found) {
        this.handles.set(attempt.handleHash.toString('hex'), attempt);
        this.attempts.set(attempt.id, attempt);
      }
    }
    return keys.map((key) => this.handles.get(key)!);
  }

  async findAttemptByHandle(hash: Buffer): Promise<AttemptRecord | null> {
    const known = this.handles.get(hash.toString('hex'));
    return known !== undefined ? known : this.tx.findAttemptByHandle(hash);
  }

  afterCommit(callback: () => void): void {
    this.committedCallbacks.push(callback);
  }

  /** Rows that belong to no fact (e.g. a closed scheduling request), written with the session's facts. */
  async write(write: Omit<FactWriteSet, 'events' | 'outbox' | 'realtime'>): Promise<void> {
    await this.apply({ ...write, events: [], outbox: [], realtime: [] });
  }

  private async apply(given: FactWriteSet): Promise<void> {
    // A workflow created here is this transaction's own: a later fact of the session that moves one of
    // its tasks (a root placed at once after a platform step began) counts there without a read.
    if (given.newWorkflow) this.lockedWorkflows.set(given.newWorkflow.id, given.newWorkflow);
    const write = this.account(given);
    if (this.options.deferWrites) this.pending.push(write);
    else await this.tx.write(write);
  }

  /** Notes what a write hands to the loops and the publisher; returns what is left to store. */
  private account(given: FactWriteSet): FactWriteSet {
    const wrote = this.wrote;
    // Handed to the publisher after the commit; the relay's loop waits before it may claim them, or
    // they are not stored at all (see RealtimeHandoffMode).
    const handoff = this.options.realtimeHandoff;
    // One realtime_outbox row holds all the transaction's records.
    if (given.realtime.length > 0) this.realtimeOutboxId ??= this.ids.newId();
    for (const record of given.realtime) record.outboxId = this.realtimeOutboxId!;
    if (handoff)
      for (const record of given.realtime) {
        if (handoff.kind === 'durable')
          record.availableAt = new Date(record.createdAt.getTime() + handoff.graceMs);
        wrote.realtime.push(record);
      }
    const write = handoff?.kind === 'memoryOnly' ? { ...given, realtime: [] } : given;
    if (write.outbox.length > 0 || write.realtime.length > 0) wrote.outbox = true;
    for (const request of [...(write.schedulingRequests ?? []), ...(write.reopenSchedulingRequests ?? [])])
      this.requestedSteps.add(request.stepId);
    for (const stepId of write.closeSchedulingRequests?.stepIds ?? []) this.requestedSteps.delete(stepId);
    wrote.scheduling = this.requestedSteps.size > 0;
    if (write.callbacks?.length) wrote.callbacks = true;
    if (write.notifications?.length) wrote.notifications = true;
    for (const command of write.workerCommands ?? []) wrote.commandsFor.push(command.workerId);
    if (write.revokeAttemptIds?.length || write.closeMapItems?.stepIds.length) wrote.capacityFreed = true;
    for (const timer of write.timers ?? [])
      if (!wrote.earliestTimer || timer.availableAt < wrote.earliestTimer)
        wrote.earliestTimer = timer.availableAt;
    return write;
  }

  async commit(before: TaskState | null, after: TaskState, draft: EventDraft, options: CommitOptions = {}) {
    const { task } = after;
    const event: TaskEventRecord = {
      id: draft.id,
      taskId: task.id,
      workflowId: task.workflowId,
      executionId: after.execution.id,
      taskVersion: task.version,
      type: draft.type,
      producer: draft.producer,
      payload: draft.payload,
      occurredAt: draft.occurredAt,
      receivedAt: draft.receivedAt,
      taskAttempt: after.execution.number,
      stepKey: draft.stepKey ?? null,
      stepAttempt: draft.stepAttempt ?? null,
      attemptId: draft.attemptId ?? null,
      stepVersion: draft.stepVersion ?? null,
      operationCode: draft.operationCode ?? null,
      sourceSeq: draft.sourceSeq !== undefined && draft.sourceSeq !== null ? BigInt(draft.sourceSeq) : null,
      lifecycleStatus: task.lifecycleStatus,
      businessStatus: task.businessStatus,
      health: task.health,
      phaseCode: draft.phaseCode ?? null,
      dataSchema: draft.dataSchema ?? null,
      errorCode: draft.errorCode ?? null,
      durationMs: draft.durationMs ?? null,
    };
    const committedAt = this.now;
    this.changes.push({ before, after });
    // A state built from an earlier fact of this session may not carry the ACL; the session has it.
    const aclBefore = before
      ? (before.acl ?? this.locked.get(task.id)?.acl ?? (await this.tx.acl(task.id)))
      : (options.write?.newAcl?.entries ?? []);
    // Grants written with this fact (an approval's approvers) count for its own channels already.
    const acl = [...aclBefore, ...(options.write?.aclGrants?.entries ?? [])];
    const notice = noticeFor(before, after, event, options.statusDefinition ?? null);
    const result = eventResult(after, event, committedAt);
    const dedup: DedupRecord | null = options.dedupHash
      ? { eventId: event.id, taskId: task.id, payloadHash: options.dedupHash, result, createdAt: committedAt }
      : null;
    // A parent or child task hears of this fact through a timer row of its own (taskFamily.ts).
    const family = familyTimers(before, after, () => this.ids.newId(), committedAt);
    const notifications = notificationsFor(
      after,
      acl,
      notice,
      options.channelNotice ?? null,
      () => this.ids.newId(),
      committedAt,
    );
    const write: FactWriteSet = {
      ...options.write,
      ...(family.length > 0 ? { timers: [...(options.write?.timers ?? []), ...family] } : {}),
      events: [event],
      ...(dedup ? { dedup: [dedup] } : {}),
      ...(notifications.length > 0 ? { notifications } : {}),
      outbox: this.options.domainEvents === false ? [] : [outboxFor(task, event)],
      realtime: [
        ...taskProjections(
          after,
          event,
          acl,
          notice,
          () => this.ids.newId(),
          committedAt,
          options.channelNotice ?? null,
          progressOnly(before, after, event, notice),
        ),
        ...(options.extraRealtime ?? []),
      ],
    };
    await this.apply(write);
    if (dedup) this.dedup.set(dedup.eventId, dedup);
    this.locked.set(task.id, { ...after, acl });
    const from = before?.task.lifecycleStatus ?? null;
    if (options.countInWorkflow !== false && from !== task.lifecycleStatus) {
      const list = this.workflowChanges.get(task.workflowId) ?? [];
      list.push({ from, to: task.lifecycleStatus });
      this.workflowChanges.set(task.workflowId, list);
    }
    return { event, result, committedAt };
  }

  /**
   * Applies the workflow aggregates touched by this transaction's facts (new workflow versions), then
   * writes whatever the session deferred.
   */
  async finish(): Promise<void> {
    const workflowIds = [...this.workflowChanges.keys()].sort();
    if (workflowIds.length > 0) {
      const missing = workflowIds.filter((id) => !this.lockedWorkflows.has(id));
      const locked = new Map(this.lockedWorkflows);
      if (missing.length > 0) for (const w of await this.tx.lockWorkflows(missing)) locked.set(w.id, w);
      for (const workflowId of workflowIds) {
        let workflow = locked.get(workflowId);
        if (!workflow) throw new Error(`workflow ${workflowId} of a task is missing`);
        for (const change of this.workflowChanges.get(workflowId)!) {
          workflow = workflowAfterTaskChange(workflow, change.from, change.to, this.now);
        }
        // Through the same hand-off as every other projection (published after the commit, and not
        // stored at all for the in-process gateway).
        this.pending.push(
          this.account({
            workflow,
            events: [],
            outbox: [],
            realtime: [workflowProjection(workflow, () => this.ids.newId(), this.now)],
          }),
        );
      }
      this.workflowChanges.clear();
    }
    if (this.pending.length > 0) this.tx.writeAtCommit(this.pending.splice(0));
  }
}

/** Runs `work` in one status transaction and wakes the loops with new work after the commit. */
export async function inFactTransaction<T>(
  deps: FactDeps,
  work: (session: FactSession) => Promise<T>,
  options: SessionOptions = {},
): Promise<T> {
  let committed: FactSession | null = null;
  const result = await deps.store.transaction(
    async (tx) => {
      const session = new FactSession(tx, deps.ids, deps.clock.now(), {
        ...options,
        ...(deps.signal.realtimeHandoff ? { realtimeHandoff: deps.signal.realtimeHandoff } : {}),
        ...(deps.signal.domainEvents === false ? { domainEvents: false } : {}),
      });
      const value = await work(session);
      await session.finish();
      committed = session;
      return value;
    },
    { writeOnly: options.writeOnly === true && options.deferWrites === true },
  );
  const session = committed as FactSession | null;
  if (session) {
    deps.signal.committed(session.wrote);
    for (const callback of session.committedCallbacks) callback();
    if (deps.observer)
      for (const { before, after } of session.changes) deps.observer.committed(before, after);
  }
  return result;
}

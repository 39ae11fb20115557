/**
 * The single write path of the status service. Every fact — a producer's event, the coordinator's end of
 * a task, a creation, an activation, a registration, a health change — is committed through
 * `FactSession.commit` inside one transaction: the new current state, the next task version, the
 * immutable event, the dedup record, the domain outbox event and the realtime projections together.
 * Workflow aggregates are applied last (`finish`), in workflow-id order, after every task lock is held,
 * so concurrent transactions always lock tasks before workflows and cannot deadlock on them.
 */
import type { EventResult, LifecycleStatus } from '@tdp/protocol';
import type { Clock, IdGenerator } from '../shared/ports.ts';
import type { RealtimeRecord, TaskEventRecord, TaskState } from '../tasks/model.ts';
import { outboxFor } from '../tasks/outboxEvents.ts';
import type { OutboxSignal } from '../tasks/ports.ts';
import type { FactWrite, StatusDefinition, StatusStore, StatusTransaction } from './ports.ts';
import { noticeFor, taskProjections, workflowAfterTaskChange, workflowProjection } from './projections.ts';

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
  write?: Omit<FactWrite, 'events' | 'outbox' | 'realtime' | 'dedup'>;
  /** More projections committed with this fact (e.g. a workflow created with it). */
  extraRealtime?: RealtimeRecord[];
  /** Record the answer under the event id, so a retry gets it back. */
  dedupHash?: string;
  statusDefinition?: StatusDefinition | null;
  /** False when the task was counted in a workflow created in this same transaction. */
  countInWorkflow?: boolean;
}

export function eventResult(state: TaskState, event: TaskEventRecord, committedAt: Date): EventResult {
  return {
    accepted: true,
    duplicate: false,
    stale: false,
    eventId: event.id,
    taskId: state.task.id,
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
  store: StatusStore;
  clock: Clock;
  ids: IdGenerator;
  signal: OutboxSignal;
}

export class FactSession {
  private readonly workflowChanges = new Map<
    string,
    { from: LifecycleStatus | null; to: LifecycleStatus }[]
  >();
  /** Tasks locked in this transaction, as of their last committed fact (no second read). */
  private readonly locked = new Map<string, TaskState>();
  wroteOutbox = false;

  constructor(
    readonly tx: StatusTransaction,
    private readonly ids: IdGenerator,
    readonly now: Date,
  ) {}

  /** The task, locked until the transaction ends; read once per transaction. */
  async lockTask(taskId: string): Promise<TaskState | null> {
    const known = this.locked.get(taskId);
    if (known) return known;
    const state = await this.tx.lockTask(taskId);
    if (state) this.locked.set(taskId, state);
    return state;
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
    const acl = before ? (before.acl ?? (await this.tx.acl(task.id))) : [];
    const notice = noticeFor(before, after, event, options.statusDefinition ?? null);
    const result = eventResult(after, event, committedAt);
    const written = await this.tx.write({
      ...options.write,
      events: [event],
      ...(options.dedupHash
        ? {
            dedup: [
              {
                eventId: event.id,
                taskId: task.id,
                payloadHash: options.dedupHash,
                result,
                createdAt: committedAt,
              },
            ],
          }
        : {}),
      outbox: [outboxFor(task, event)],
      realtime: [
        ...taskProjections(after, event, acl, notice, () => this.ids.newId(), committedAt),
        ...(options.extraRealtime ?? []),
      ],
    });
    if (!written.idempotencyClaimed) return { event, result, committedAt, idempotencyClaimed: false };
    this.wroteOutbox = true;
    this.locked.set(task.id, { ...after, acl });
    const from = before?.task.lifecycleStatus ?? null;
    if (options.countInWorkflow !== false && from !== task.lifecycleStatus) {
      const list = this.workflowChanges.get(task.workflowId) ?? [];
      list.push({ from, to: task.lifecycleStatus });
      this.workflowChanges.set(task.workflowId, list);
    }
    return { event, result, committedAt, idempotencyClaimed: true };
  }

  /** Applies the workflow aggregates touched by this transaction's facts (new workflow versions). */
  async finish(): Promise<void> {
    for (const workflowId of [...this.workflowChanges.keys()].sort()) {
      let workflow = await this.tx.lockWorkflow(workflowId);
      if (!workflow) throw new Error(`workflow ${workflowId} of a task is missing`);
      for (const change of this.workflowChanges.get(workflowId)!) {
        workflow = workflowAfterTaskChange(workflow, change.from, change.to, this.now);
      }
      await this.tx.write({
        workflow,
        events: [],
        outbox: [],
        realtime: [workflowProjection(workflow, () => this.ids.newId(), this.now)],
      });
    }
    this.workflowChanges.clear();
  }
}

/** Runs `work` in one status transaction and wakes the outbox dispatcher after the commit. */
export async function inFactTransaction<T>(
  deps: FactDeps,
  work: (session: FactSession) => Promise<T>,
): Promise<T> {
  let wrote = false;
  const result = await deps.store.transaction(async (tx) => {
    const session = new FactSession(tx, deps.ids, deps.clock.now());
    const value = await work(session);
    await session.finish();
    wrote = session.wroteOutbox;
    return value;
  });
  if (wrote) deps.signal.outboxWritten();
  return result;
}

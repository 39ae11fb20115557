/**
 * The coordinator's own facts about a task it owns: TASK_COMPLETED and TASK_FAILED, reported with its
 * application key. They end the task's execution; only the coordinator may send them, because a failed
 * step alone does not say the task failed (it may be optional, or about to be retried).
 */
import type { EventResult } from '@tdp/protocol';
import type { StatusDefinition, TaskState } from '../facts/records.ts';
import type { FactSession } from '../facts/session.ts';
import { checkBusinessStatus, endTask, isRefusal, sanitiseError } from '../facts/stateMachine.ts';
import { AppError } from '../shared/errors.ts';
import { eventPayload, type ReportedEvent } from './reportedEvents.ts';

export async function reportCoordinatorEvent(
  session: FactSession,
  before: TaskState,
  event: ReportedEvent,
  hash: string,
  statusDefinition: StatusDefinition | null,
): Promise<EventResult> {
  const now = session.now;
  if (BigInt(event.sourceSeq) <= before.task.coordinatorSourceSeq) {
    throw new AppError(
      'SOURCE_SEQ_REGRESSION',
      `sourceSeq ${event.sourceSeq} is not above ${before.task.coordinatorSourceSeq}, the coordinator's last for this task`,
    );
  }
  const eventType = event.eventType as 'TASK_COMPLETED' | 'TASK_FAILED';
  const businessRefusal = checkBusinessStatus(
    statusDefinition,
    before.task.businessStatus,
    event.businessStatus,
    eventType,
  );
  if (businessRefusal) throw new AppError(businessRefusal.code, businessRefusal.message);
  const failure =
    eventType === 'TASK_FAILED'
      ? { ...sanitiseError(event.error, 'TASK_FAILED'), failedStepId: event.failedStepId ?? null }
      : null;
  const ended = endTask(
    before.task,
    before.execution,
    eventType === 'TASK_COMPLETED' ? 'SUCCEEDED' : 'FAILED',
    { businessStatus: event.businessStatus, durationMs: event.durationMs, failure },
    now,
  );
  if (isRefusal(ended)) throw new AppError(ended.code, ended.message);
  const revokeAttemptIds = before.steps.filter((s) => s.attemptId && s.current).map((s) => s.attemptId!);
  const after: TaskState = {
    task: { ...ended.task, coordinatorSourceSeq: BigInt(event.sourceSeq) },
    execution: ended.execution,
    steps: before.steps,
  };
  const { result } = await session.commit(
    before,
    after,
    {
      id: event.eventId,
      type: eventType,
      producer: `application:${before.task.applicationId}`,
      payload: eventPayload(event),
      occurredAt: event.occurredAt ? new Date(event.occurredAt) : now,
      receivedAt: now,
      sourceSeq: event.sourceSeq,
      errorCode: failure?.code ?? null,
      durationMs: event.durationMs ?? null,
    },
    {
      dedupHash: hash,
      statusDefinition,
      write: { task: after.task, execution: after.execution, revokeAttemptIds },
    },
  );
  return result;
}

import type { OutboxRecord, TaskEventRecord, TaskRecord } from './records.ts';

/**
 * The domain event published for a task event. Its id is the event id, so every copy that reaches the
 * bus (after a crash, a lease takeover or a retry) carries the same id and consumers can drop repeats.
 */
export function outboxFor(task: TaskRecord, event: TaskEventRecord): OutboxRecord {
  return {
    id: event.id,
    tenantId: task.tenantId,
    applicationId: task.applicationId,
    aggregateId: task.id,
    eventType: event.type,
    payload: {
      id: event.id,
      type: event.type,
      occurredAt: event.occurredAt.toISOString(),
      tenantId: task.tenantId,
      applicationId: task.applicationId,
      taskId: task.id,
      executionId: event.executionId,
      externalRef: task.externalRef,
      taskVersion: event.taskVersion.toString(),
      // A step's event names its step and attempt (the Temporal bridge signals the workflow with them).
      ...(event.stepKey !== null ? { stepKey: event.stepKey, stepAttempt: event.stepAttempt } : {}),
      data: event.payload,
    },
    createdAt: event.occurredAt,
  };
}

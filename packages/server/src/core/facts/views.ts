import {
  type LifecycleStatus,
  messageForPeople,
  type PublicError,
  type StepStatus,
  type StructuredError,
  type TaskWithExecution,
} from '@tdp/protocol';
import type { StepRecord, TaskState } from './records.ts';

/** The lifecycle of one step attempt, from its orchestration status. */
export function stepLifecycle(status: StepStatus): LifecycleStatus {
  switch (status) {
    case 'WAITING':
    case 'READY':
    case 'QUEUED':
      return 'PENDING';
    case 'RUNNING':
      return 'RUNNING';
    case 'SUCCEEDED':
    case 'SKIPPED':
      return 'SUCCEEDED';
    case 'FAILED':
      return 'FAILED';
    case 'CANCELLED':
      return 'CANCELLED';
    default: {
      const unreachable: never = status;
      throw new Error(`unknown step status ${String(unreachable)}`);
    }
  }
}

/**
 * The message a person is shown for an error: its `userMessage` as checked when it was stored, checked
 * again here so that a row written before that check shows a sentence too (never its raw text).
 */
export function shownUserMessage(error: Pick<StructuredError, 'code' | 'userMessage'> | null): string | null {
  return error?.userMessage ? messageForPeople(error.code, error.userMessage).userMessage : null;
}

/** What of an error may leave the server: never the diagnostics reference nor the technical detail. */
export function publicError(error: StructuredError | null): PublicError | null {
  if (!error) return null;
  return {
    category: error.category,
    code: error.code,
    retryable: error.retryable,
    userMessage: shownUserMessage(error),
  };
}

const iso = (date: Date | null) => date?.toISOString() ?? null;
const between = (from: Date | null, to: Date | null) =>
  from && to ? Math.max(0, to.getTime() - from.getTime()) : null;

export function toStepView(step: StepRecord): TaskWithExecution['execution']['steps'][number] {
  return {
    id: step.id,
    key: step.key,
    attempt: step.attempt,
    attemptId: step.attemptId,
    executionId: step.attemptId,
    capability: step.capability,
    capabilityVersion: step.capabilityVersion,
    operationCode: step.operationCode,
    dependsOn: step.dependsOn,
    dynamic: step.dynamic,
    status: step.status,
    lifecycleStatus: stepLifecycle(step.status),
    businessStatus: step.businessStatus,
    phaseCode: step.phaseCode,
    phaseLabel: step.phaseLabel,
    progress: step.progress,
    health: step.health,
    version: step.version.toString(),
    dataSchema: step.dataSchema,
    data: step.stateData ?? null,
    error: publicError(step.error),
    startedAt: iso(step.startedAt),
    finishedAt: iso(step.finishedAt),
    durationMs: step.durationMs,
    durationSource: step.durationSource,
    lastHeartbeatAt: iso(step.lastHeartbeatAt),
    reusedFromExecutionId: step.reusedFromExecutionId,
    waitingFor: step.waitingFor,
    createdAt: step.createdAt.toISOString(),
    updatedAt: step.updatedAt.toISOString(),
  };
}

/** The public JSON shape of a task with its current execution (versions as decimal strings). */
export function toTaskView({ task, execution, steps }: TaskState): TaskWithExecution {
  return {
    task: {
      id: task.id,
      workflowId: task.workflowId,
      applicationId: task.applicationId,
      workflowName: task.workflowName,
      workflowVersion: task.workflowVersion,
      clientTaskKey: task.clientTaskKey,
      name: task.name,
      externalRef: task.externalRef,
      input: task.input,
      callbackUrl: task.callbackUrl,
      priority: task.priority,
      ownerId: task.ownerId,
      taskType: task.taskType,
      productId: task.productId,
      statusDefinitionVersion: task.statusDefinitionVersion,
      lifecycleStatus: task.lifecycleStatus,
      businessStatus: task.businessStatus,
      health: task.health,
      failure: task.failure
        ? { ...publicError(task.failure)!, failedStepId: task.failure.failedStepId }
        : null,
      version: task.version.toString(),
      currentExecutionId: task.currentExecutionId,
      createdAt: task.createdAt.toISOString(),
      updatedAt: task.updatedAt.toISOString(),
      startedAt: iso(task.startedAt),
      finishedAt: iso(task.finishedAt),
      queueDurationMs: between(task.createdAt, task.startedAt),
      runDurationMs: task.durationMs,
      totalDurationMs: between(task.createdAt, task.finishedAt),
      parentTaskId: task.parentTaskId,
    },
    execution: {
      id: execution.id,
      number: execution.number,
      status: execution.status,
      progress: execution.progress,
      version: execution.version.toString(),
      createdAt: execution.createdAt.toISOString(),
      startedAt: iso(execution.startedAt),
      completedAt: iso(execution.completedAt),
      steps: steps.filter((s) => s.current).map(toStepView),
      orchestration:
        execution.snapshot.engine === 'temporal'
          ? { engine: 'temporal', workflowId: execution.id }
          : { engine: 'native', workflowId: null },
    },
  };
}

/**
 * What an accepted event does to a step attempt and to its task. Pure functions: given the current
 * records and the event, the new records or a refusal. Terminal states are final; a retry is a new attempt.
 */
import {
  clampText,
  type ErrorCode,
  type ExecutionStatus,
  errorDetailMaxLength,
  type Health,
  type LifecycleStatus,
  messageForPeople,
  type Progress,
  type StepStatus,
  type StructuredError,
} from '@tdp/protocol';
import { canTransition, isTerminal, lifecycleOf, transitionExecution } from './execution.ts';
import type { ExecutionRecord, StatusDefinition, StepRecord, TaskFailure, TaskRecord } from './records.ts';

export interface Refusal {
  refused: true;
  code: ErrorCode;
  message: string;
}

/**
 * The words every refusal of a change to something ended carries: a worker's late report is logged at
 * debug by them (adapters/inbound/http/taskLogs.ts), so they are one constant, not a sentence retyped.
 */
export const alreadyEnded = 'already ended';

export const refuse = (code: ErrorCode, message: string): Refusal => ({ refused: true, code, message });
export const isRefusal = (value: unknown): value is Refusal => (value as Refusal | null)?.refused === true;

export const stepEventTypes = ['STEP_STARTED', 'STEP_PROGRESS', 'STEP_COMPLETED', 'STEP_FAILED'] as const;
export type StepEventType = (typeof stepEventTypes)[number];
export type CoordinatorEventType = 'TASK_COMPLETED' | 'TASK_FAILED';

export interface StepEventInput {
  eventType: StepEventType;
  producerId: string;
  sourceSeq: number;
  businessStatus?: string | undefined;
  phaseCode?: string | undefined;
  phaseLabel?: string | undefined;
  progress?: Progress | undefined;
  durationMs?: number | undefined;
  durationSource?: 'MONOTONIC' | 'WALL_CLOCK_ESTIMATE' | undefined;
  data?: { schema: string; value: unknown } | undefined;
  error?: StructuredError | undefined;
}

const finishedStep: ReadonlySet<StepStatus> = new Set(['SUCCEEDED', 'FAILED', 'SKIPPED', 'CANCELLED']);
const pendingStep: ReadonlySet<StepStatus> = new Set(['WAITING', 'READY', 'QUEUED']);

export const stepIsFinished = (status: StepStatus) => finishedStep.has(status);

/**
 * A step whose worker stopped it because its execution is being cancelled was cancelled, not failed: the
 * worker reports the stop as STEP_FAILED with category CANCELLED, and the step reads CANCELLED with that
 * error as its reason. A real failure reported meanwhile stays FAILED.
 */
export function stoppedByCancel(step: StepRecord): StepRecord {
  return step.status === 'FAILED' && step.error?.category === 'CANCELLED'
    ? { ...step, status: 'CANCELLED' }
    : step;
}

const redactSecrets = (text: string) =>
  text.replace(/\b(bearer|token|secret|password|apikey|api_key)\b\s*[:=]?\s*[^\s)\]}'",;]+/gi, '[redacted]');

/**
 * The bounded, redacted form of an error that may be stored and shown. Its `userMessage` is always a
 * sentence for people (`messageForPeople`): a producer's message that is a JSON body, an internal path,
 * an HTTP answer or a stack is moved to `detail`, and the sentence for its code takes its place.
 */
export function sanitiseError(error: StructuredError | undefined, fallbackCode: string): StructuredError {
  const base = error ?? { category: 'UNKNOWN', code: fallbackCode, retryable: false };
  const shown = base.userMessage !== undefined ? messageForPeople(base.code, base.userMessage) : null;
  const details = [shown?.detail, base.detail].filter((d): d is string => !!d?.trim());
  const detail =
    details.length > 0 ? clampText(redactSecrets(details.join(' — ')), errorDetailMaxLength) : null;
  return {
    category: base.category,
    code: base.code,
    retryable: base.retryable,
    ...(shown ? { userMessage: redactSecrets(shown.userMessage) } : {}),
    ...(detail ? { detail } : {}),
    ...(base.diagnosticsRef !== undefined ? { diagnosticsRef: base.diagnosticsRef } : {}),
  };
}

export function progressPercent(progress: Progress | null | undefined): number | null {
  if (!progress) return null;
  if (progress.percent !== undefined) return progress.percent;
  if (progress.current !== undefined && progress.total)
    return Math.min(100, (progress.current / progress.total) * 100);
  return null;
}

/** Applies a producer's event to its step attempt. The sourceSeq check happens before (validation chain). */
export function applyStepEvent(step: StepRecord, input: StepEventInput, at: Date): StepRecord | Refusal {
  if (finishedStep.has(step.status)) {
    return refuse(
      'INVALID_TRANSITION',
      `step ${step.key} attempt ${step.attempt} ${alreadyEnded} ${step.status}; a retry is a new attempt`,
    );
  }
  if (input.eventType === 'STEP_STARTED' && !pendingStep.has(step.status)) {
    return refuse('INVALID_TRANSITION', `step ${step.key} attempt ${step.attempt} has already started`);
  }
  const next: StepRecord = {
    ...step,
    version: step.version + 1n,
    updatedAt: at,
    sourceSeqs: { ...step.sourceSeqs, [input.producerId]: input.sourceSeq },
    // Any accepted event from the producer proves the execution is alive.
    health: 'HEALTHY',
    staleSince: null,
    lastHeartbeatAt: at,
    businessStatus: input.businessStatus ?? step.businessStatus,
    phaseCode: input.phaseCode ?? step.phaseCode,
    phaseLabel: input.phaseLabel ?? step.phaseLabel,
    progress: input.progress ?? step.progress,
  };
  if (pendingStep.has(step.status)) {
    next.status = 'RUNNING';
    next.startedAt = at;
  }
  if (input.data) {
    next.dataSchema = input.data.schema;
    next.stateData = input.data.value;
  }
  switch (input.eventType) {
    case 'STEP_STARTED':
    case 'STEP_PROGRESS':
      break;
    case 'STEP_COMPLETED':
      next.status = 'SUCCEEDED';
      next.finishedAt = at;
      next.progress = { ...(next.progress ?? {}), percent: 100 };
      break;
    case 'STEP_FAILED':
      next.status = 'FAILED';
      next.finishedAt = at;
      next.error = sanitiseError(input.error, 'STEP_FAILED');
      break;
    default: {
      const unreachable: never = input.eventType;
      throw new Error(`unknown step event ${String(unreachable)}`);
    }
  }
  if (next.finishedAt && input.durationMs !== undefined) {
    next.durationMs = input.durationMs;
    next.durationSource = input.durationSource ?? 'MONOTONIC';
  }
  return next;
}

/** Task health from its current step attempts: STALE beats DEGRADED beats HEALTHY. */
export function deriveHealth(steps: StepRecord[]): Health {
  const current = steps.filter((s) => s.current);
  if (current.some((s) => s.health === 'STALE' && s.status === 'RUNNING')) return 'STALE';
  if (current.some((s) => s.status === 'FAILED' && s.failurePolicy === 'CONTINUE_WITH_WARNING'))
    return 'DEGRADED';
  return 'HEALTHY';
}

/** Execution progress from its steps: finished steps count 100, running ones their reported percent. */
export function aggregateProgress(execution: ExecutionRecord, steps: StepRecord[]): number {
  const current = steps.filter((s) => s.current);
  if (current.length === 0) return execution.progress;
  const total = current.reduce(
    (sum, s) => sum + (stepIsFinished(s.status) ? 100 : (progressPercent(s.progress) ?? 0)),
    0,
  );
  return Math.max(execution.progress, Math.min(99, Math.floor(total / current.length)));
}

/** The business status of an unclassified task while an approval step waits for people. */
export const waitingUserAction = 'WAITING_USER_ACTION';

/**
 * The task after one of its steps changed: the execution starts on the first running step, progress and
 * health are re-derived, and an unclassified task's business status follows its lifecycle (and is
 * WAITING_USER_ACTION while an approval step waits).
 */
export function taskAfterStepChange(
  task: TaskRecord,
  execution: ExecutionRecord,
  steps: StepRecord[],
  businessStatus: string | undefined,
  at: Date,
): { task: TaskRecord; execution: ExecutionRecord } {
  let nextExecution = execution;
  const current = steps.filter((s) => s.current);
  const queued = current.some((s) => s.status === 'QUEUED');
  const started = current.some((s) => !pendingStep.has(s.status));
  if (execution.status === 'CREATED' && (queued || started))
    nextExecution = transitionExecution(nextExecution, 'QUEUED', at);
  if (nextExecution.status === 'QUEUED' && started)
    nextExecution = transitionExecution(nextExecution, 'RUNNING', at);
  if (nextExecution.status === 'RUNNING') {
    const progress = aggregateProgress(nextExecution, steps);
    if (progress !== nextExecution.progress) nextExecution = { ...nextExecution, progress, updatedAt: at };
  }
  const lifecycleStatus = lifecycleOf(nextExecution.status);
  // A task whose approval step waits for people is still RUNNING: waiting is not a lifecycle of its own,
  // so only an unclassified task's business status says it (WAITING_USER_ACTION).
  const waitingForUser =
    lifecycleStatus === 'RUNNING' &&
    current.some((s) => s.status === 'RUNNING' && s.waitingFor?.kind === 'approval');
  return {
    execution: nextExecution,
    task: {
      ...task,
      lifecycleStatus,
      businessStatus:
        businessStatus ??
        (task.statusDefinitionVersion !== null
          ? task.businessStatus
          : waitingForUser
            ? waitingUserAction
            : lifecycleStatus),
      health: deriveHealth(steps),
      startedAt: task.startedAt ?? (lifecycleStatus === 'RUNNING' ? at : null),
      version: task.version + 1n,
      updatedAt: at,
    },
  };
}

/** The coordinator ends the task: execution and task become terminal; a terminal task stays terminal. */
export function endTask(
  task: TaskRecord,
  execution: ExecutionRecord,
  outcome: Extract<ExecutionStatus, 'SUCCEEDED' | 'FAILED' | 'CANCELLED'>,
  details: {
    businessStatus?: string | undefined;
    durationMs?: number | undefined;
    failure?: TaskFailure | null;
  },
  at: Date,
): { task: TaskRecord; execution: ExecutionRecord } | Refusal {
  if (isTerminal(execution.status)) {
    return refuse(
      'INVALID_TRANSITION',
      `task ${task.id} ${alreadyEnded} ${lifecycleOf(execution.status)}; terminal states are final`,
    );
  }
  // A cancelling execution ends CANCELLED (or FAILED, TIMED_OUT), never SUCCEEDED.
  if (!canTransition(execution.status, outcome)) {
    return refuse(
      'INVALID_TRANSITION',
      `task ${task.id} is ${execution.status.toLowerCase()}; it cannot end ${outcome.toLowerCase()}`,
    );
  }
  const nextExecution = transitionExecution(execution, outcome, at);
  const lifecycleStatus = lifecycleOf(nextExecution.status);
  return {
    execution: nextExecution,
    task: {
      ...task,
      lifecycleStatus,
      businessStatus:
        details.businessStatus ??
        (task.statusDefinitionVersion === null ? lifecycleStatus : task.businessStatus),
      failure: details.failure ?? task.failure,
      durationMs: details.durationMs ?? task.durationMs,
      finishedAt: at,
      version: task.version + 1n,
      updatedAt: at,
    },
  };
}

const coordinatorLifecycle: Record<CoordinatorEventType, LifecycleStatus> = {
  TASK_COMPLETED: 'SUCCEEDED',
  TASK_FAILED: 'FAILED',
};

/**
 * A business status must be registered in the task's bound status definition, may only follow the
 * statuses it lists, and may not declare an end unless the coordinator is ending the task.
 */
export function checkBusinessStatus(
  definition: StatusDefinition | null,
  currentBusinessStatus: string,
  requested: string | undefined,
  eventType: StepEventType | CoordinatorEventType,
): Refusal | null {
  if (requested === undefined) return null;
  if (!definition) {
    return refuse(
      'UNKNOWN_BUSINESS_STATUS',
      `businessStatus "${requested}" needs a status definition; classify the task with a taskType and statusDefinitionVersion first`,
    );
  }
  const entry = definition.statuses.find((s) => s.code === requested);
  if (!entry) {
    return refuse(
      'UNKNOWN_BUSINESS_STATUS',
      `businessStatus "${requested}" is not registered in ${definition.taskType} v${definition.version}`,
    );
  }
  if (
    entry.allowedFrom &&
    entry.allowedFrom.length > 0 &&
    !entry.allowedFrom.includes(currentBusinessStatus)
  ) {
    return refuse(
      'INVALID_TRANSITION',
      `businessStatus ${requested} may not follow ${currentBusinessStatus} (allowed after: ${entry.allowedFrom.join(', ')})`,
    );
  }
  const ends =
    entry.terminal === true ||
    ['SUCCEEDED', 'FAILED', 'CANCELLED', 'TIMED_OUT'].includes(entry.lifecycleStatus);
  if (eventType === 'TASK_COMPLETED' || eventType === 'TASK_FAILED') {
    if (entry.lifecycleStatus !== coordinatorLifecycle[eventType]) {
      return refuse(
        'INVALID_TRANSITION',
        `businessStatus ${requested} maps to ${entry.lifecycleStatus}, not ${coordinatorLifecycle[eventType]}`,
      );
    }
  } else if (ends) {
    return refuse(
      'INVALID_TRANSITION',
      `businessStatus ${requested} ends the task; only the coordinator ends a task`,
    );
  }
  return null;
}

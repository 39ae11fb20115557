/**
 * An administrator's correction of a task's or a step's status (docs/operators.md): what it changes,
 * and whether the state machine allows it. Pure. A correction the machines forbid (a terminal state
 * moved, a step sent back) is refused unless the operator forces it.
 */
import type { ExecutionStatus, LifecycleStatus, StepStatus } from '@tdp/protocol';
import { canTransition, isTerminal } from '../facts/execution.ts';
import type { ExecutionRecord, StepRecord, TaskRecord } from '../facts/records.ts';
import { type Refusal, refuse, stepIsFinished } from '../facts/stateMachine.ts';

export interface CorrectionRequest {
  stepKey?: string | undefined;
  lifecycleStatus: LifecycleStatus;
  businessStatus?: string | undefined;
  reason: string;
  force?: boolean | undefined;
}

/** The execution statuses a task lifecycle may stand for, the one a forced correction takes last. */
const executionStatusesOf: Record<LifecycleStatus, ExecutionStatus[]> = {
  PENDING: ['QUEUED', 'CREATED'],
  RUNNING: ['RUNNING'],
  SUCCEEDED: ['SUCCEEDED'],
  FAILED: ['FAILED'],
  CANCELLED: ['CANCELLED'],
  TIMED_OUT: ['TIMED_OUT'],
};

/** The step status a lifecycle status names (a step has no TIMED_OUT: its timeout is a failure). */
const stepStatusOf: Record<LifecycleStatus, StepStatus | null> = {
  PENDING: 'READY',
  RUNNING: 'RUNNING',
  SUCCEEDED: 'SUCCEEDED',
  FAILED: 'FAILED',
  CANCELLED: 'CANCELLED',
  TIMED_OUT: null,
};

const pendingStep: ReadonlySet<StepStatus> = new Set(['WAITING', 'READY', 'QUEUED']);

export interface TaskCorrection {
  task: TaskRecord;
  execution: ExecutionRecord;
  forced: boolean;
}

/** The corrected task and execution, or why the machine forbids it (`CORRECTION_FORBIDDEN`). */
export function correctTaskStatus(
  task: TaskRecord,
  execution: ExecutionRecord,
  request: CorrectionRequest,
  at: Date,
): TaskCorrection | Refusal {
  const candidates = executionStatusesOf[request.lifecycleStatus];
  const same = candidates.includes(execution.status);
  const allowed = same ? execution.status : candidates.find((c) => canTransition(execution.status, c));
  if (allowed === undefined && !request.force) {
    return refuse(
      'CORRECTION_FORBIDDEN',
      `execution #${execution.number} is ${execution.status}; the state machine does not let it become ${request.lifecycleStatus} (send force: true to correct it anyway)`,
    );
  }
  const status = allowed ?? candidates[candidates.length - 1]!;
  const terminal = isTerminal(status);
  const correctedExecution: ExecutionRecord =
    status === execution.status
      ? execution
      : {
          ...execution,
          status,
          startedAt: status === 'RUNNING' ? (execution.startedAt ?? at) : execution.startedAt,
          completedAt: terminal ? (execution.completedAt ?? at) : null,
          version: execution.version + 1n,
          updatedAt: at,
        };
  const finishedAt = terminal ? (task.finishedAt ?? at) : null;
  return {
    task: {
      ...task,
      lifecycleStatus: request.lifecycleStatus,
      businessStatus: request.businessStatus ?? task.businessStatus,
      startedAt: status === 'RUNNING' ? (task.startedAt ?? at) : task.startedAt,
      finishedAt,
      durationMs:
        finishedAt && task.startedAt ? Math.max(0, finishedAt.getTime() - task.startedAt.getTime()) : null,
      version: task.version + 1n,
      updatedAt: at,
    },
    execution: correctedExecution,
    forced: allowed === undefined,
  };
}

/** The corrected step, or why it may not be (`CORRECTION_FORBIDDEN`, or no step status to take). */
export function correctStepStatus(
  step: StepRecord,
  request: CorrectionRequest,
  at: Date,
): { step: StepRecord; forced: boolean } | Refusal {
  const status = stepStatusOf[request.lifecycleStatus];
  if (status === null) {
    return refuse(
      'VALIDATION_FAILED',
      `a step cannot be ${request.lifecycleStatus}; a step's timeout is FAILED`,
    );
  }
  // The step machine: a pending step may start or end, a running one may end, an ended one is final.
  const allowed =
    status === step.status ||
    (pendingStep.has(step.status) && status !== 'READY') ||
    (step.status === 'RUNNING' && stepIsFinished(status));
  if (!allowed && !request.force) {
    return refuse(
      'CORRECTION_FORBIDDEN',
      `step ${step.key} is ${step.status}; the state machine does not let it become ${status} (send force: true to correct it anyway)`,
    );
  }
  const finished = stepIsFinished(status);
  return {
    step: {
      ...step,
      status,
      businessStatus: request.businessStatus ?? step.businessStatus,
      startedAt: status === 'RUNNING' ? (step.startedAt ?? at) : step.startedAt,
      finishedAt: finished ? (step.finishedAt ?? at) : null,
      version: step.version + 1n,
      updatedAt: at,
    },
    forced: !allowed,
  };
}

/** The execution state machine and the lifecycle it maps to. Pure. */
import type { ExecutionStatus, LifecycleStatus } from '@tdp/protocol';
import type { ExecutionRecord } from './records.ts';

const allowed: Record<ExecutionStatus, readonly ExecutionStatus[]> = {
  CREATED: ['QUEUED', 'SUCCEEDED', 'FAILED', 'TIMED_OUT', 'CANCELLING', 'CANCELLED'],
  QUEUED: ['RUNNING', 'SUCCEEDED', 'FAILED', 'TIMED_OUT', 'CANCELLING', 'CANCELLED'],
  RUNNING: ['SUCCEEDED', 'FAILED', 'TIMED_OUT', 'CANCELLING', 'CANCELLED'],
  CANCELLING: ['CANCELLED', 'FAILED', 'TIMED_OUT'],
  SUCCEEDED: [],
  FAILED: [],
  TIMED_OUT: [],
  CANCELLED: [],
};

export function isTerminal(status: ExecutionStatus): boolean {
  return allowed[status].length === 0;
}

export function canTransition(from: ExecutionStatus, to: ExecutionStatus): boolean {
  return allowed[from].includes(to);
}

export class TransitionRefused extends Error {
  constructor(
    readonly from: ExecutionStatus,
    readonly to: ExecutionStatus,
  ) {
    super(`execution cannot go from ${from} to ${to}`);
  }
}

/**
 * Moves an execution to `to`, keeping its bookkeeping: startedAt on first RUNNING, completedAt on a
 * terminal state, progress 100 on success, version + 1. Same state → unchanged (no new version).
 */
export function transitionExecution(
  execution: ExecutionRecord,
  to: ExecutionStatus,
  at: Date,
): ExecutionRecord {
  if (execution.status === to) return execution;
  if (!canTransition(execution.status, to)) throw new TransitionRefused(execution.status, to);
  return {
    ...execution,
    status: to,
    startedAt: to === 'RUNNING' && !execution.startedAt ? at : execution.startedAt,
    completedAt: isTerminal(to) ? at : execution.completedAt,
    progress: to === 'SUCCEEDED' ? 100 : execution.progress,
    version: execution.version + 1n,
    updatedAt: at,
  };
}

/** Progress only rises, stays within 0–100 and moves only while running. */
export function setExecutionProgress(
  execution: ExecutionRecord,
  progress: number,
  at: Date,
): ExecutionRecord {
  if (execution.status !== 'RUNNING')
    throw new Error(`cannot set progress while execution is ${execution.status}`);
  if (!Number.isInteger(progress) || progress < execution.progress || progress > 100) {
    throw new Error(`progress must be an integer between ${execution.progress} and 100`);
  }
  if (progress === execution.progress) return execution;
  return { ...execution, progress, version: execution.version + 1n, updatedAt: at };
}

export function lifecycleOf(status: ExecutionStatus): LifecycleStatus {
  switch (status) {
    case 'CREATED':
    case 'QUEUED':
      return 'PENDING';
    case 'RUNNING':
    case 'CANCELLING':
      return 'RUNNING';
    case 'SUCCEEDED':
      return 'SUCCEEDED';
    case 'FAILED':
      return 'FAILED';
    case 'TIMED_OUT':
      return 'TIMED_OUT';
    case 'CANCELLED':
      return 'CANCELLED';
    default: {
      const unreachable: never = status;
      throw new Error(`unknown execution status ${String(unreachable)}`);
    }
  }
}

export type CancelPlan =
  | { kind: 'transition'; to: 'CANCELLED' | 'CANCELLING' }
  | { kind: 'already'; status: ExecutionStatus }
  | { kind: 'refused'; status: ExecutionStatus };

/**
 * What a cancel request does. Nothing has started before RUNNING, so those executions end at once;
 * a running one goes to CANCELLING until its attempts stop. Asking again is answered, not refused.
 */
export function planCancel(status: ExecutionStatus): CancelPlan {
  switch (status) {
    case 'CREATED':
    case 'QUEUED':
      return { kind: 'transition', to: 'CANCELLED' };
    case 'RUNNING':
      return { kind: 'transition', to: 'CANCELLING' };
    case 'CANCELLING':
    case 'CANCELLED':
      return { kind: 'already', status };
    case 'SUCCEEDED':
    case 'FAILED':
    case 'TIMED_OUT':
      return { kind: 'refused', status };
    default: {
      const unreachable: never = status;
      throw new Error(`unknown execution status ${String(unreachable)}`);
    }
  }
}

import type { ExecutionStatus } from '@tdp/protocol';
import { describe, expect, it } from 'vitest';
import {
  canTransition,
  isTerminal,
  lifecycleOf,
  planCancel,
  setExecutionProgress,
  TransitionRefused,
  transitionExecution,
} from '../src/core/facts/execution.ts';
import type { ExecutionRecord } from '../src/core/facts/records.ts';

const at = new Date('2026-01-01T00:00:00Z');
const later = new Date('2026-01-01T00:01:00Z');

function execution(status: ExecutionStatus, progress = 0): ExecutionRecord {
  return {
    id: 'e',
    taskId: 't',
    number: 1,
    status,
    progress,
    snapshot: { definitionId: 'd', name: 'w', version: '1', steps: [] },
    version: 3n,
    callbackSequence: 0,
    createdAt: at,
    startedAt: null,
    completedAt: null,
    updatedAt: at,
  };
}

describe('execution state machine', () => {
  it('allows exactly the intended transitions, and none out of a terminal state', () => {
    const all: ExecutionStatus[] = [
      'CREATED',
      'QUEUED',
      'RUNNING',
      'CANCELLING',
      'SUCCEEDED',
      'FAILED',
      'TIMED_OUT',
      'CANCELLED',
    ];
    const allowed = all.flatMap((from) =>
      all.filter((to) => canTransition(from, to)).map((to) => `${from}->${to}`),
    );
    expect(allowed.sort()).toEqual(
      [
        'CREATED->QUEUED',
        'CREATED->SUCCEEDED',
        'CREATED->FAILED',
        'CREATED->TIMED_OUT',
        'CREATED->CANCELLING',
        'CREATED->CANCELLED',
        'QUEUED->RUNNING',
        'QUEUED->SUCCEEDED',
        'QUEUED->FAILED',
        'QUEUED->TIMED_OUT',
        'QUEUED->CANCELLING',
        'QUEUED->CANCELLED',
        'RUNNING->SUCCEEDED',
        'RUNNING->FAILED',
        'RUNNING->TIMED_OUT',
        'RUNNING->CANCELLING',
        'RUNNING->CANCELLED',
        'CANCELLING->FAILED',
        'CANCELLING->TIMED_OUT',
        'CANCELLING->CANCELLED',
      ].sort(),
    );
    expect(all.filter(isTerminal)).toEqual(['SUCCEEDED', 'FAILED', 'TIMED_OUT', 'CANCELLED']);
  });

  it('keeps start and completion times, progress and version', () => {
    const running = transitionExecution(
      transitionExecution(execution('CREATED'), 'QUEUED', at),
      'RUNNING',
      later,
    );
    expect(running).toMatchObject({ status: 'RUNNING', startedAt: later, completedAt: null, version: 5n });
    const done = transitionExecution(running, 'SUCCEEDED', later);
    expect(done).toMatchObject({ status: 'SUCCEEDED', progress: 100, completedAt: later, version: 6n });
    expect(transitionExecution(done, 'SUCCEEDED', later)).toBe(done);
    expect(() => transitionExecution(done, 'RUNNING', later)).toThrow(TransitionRefused);
  });

  it('only lets progress rise, within 0–100, while running', () => {
    const running = execution('RUNNING', 40);
    expect(setExecutionProgress(running, 55, later)).toMatchObject({ progress: 55, version: 4n });
    expect(setExecutionProgress(running, 40, later)).toBe(running);
    expect(() => setExecutionProgress(running, 39, later)).toThrow(/between 40 and 100/);
    expect(() => setExecutionProgress(running, 101, later)).toThrow();
    expect(() => setExecutionProgress(execution('QUEUED'), 10, later)).toThrow(/QUEUED/);
  });

  it('plans cancellation: immediate before running, CANCELLING while running, answered when done', () => {
    expect(planCancel('CREATED')).toEqual({ kind: 'transition', to: 'CANCELLED' });
    expect(planCancel('QUEUED')).toEqual({ kind: 'transition', to: 'CANCELLED' });
    expect(planCancel('RUNNING')).toEqual({ kind: 'transition', to: 'CANCELLING' });
    expect(planCancel('CANCELLING')).toEqual({ kind: 'already', status: 'CANCELLING' });
    expect(planCancel('CANCELLED')).toEqual({ kind: 'already', status: 'CANCELLED' });
    expect(planCancel('SUCCEEDED')).toEqual({ kind: 'refused', status: 'SUCCEEDED' });
  });

  it('maps execution status to the task lifecycle', () => {
    expect(lifecycleOf('CREATED')).toBe('PENDING');
    expect(lifecycleOf('CANCELLING')).toBe('RUNNING');
    expect(lifecycleOf('CANCELLED')).toBe('CANCELLED');
    expect(lifecycleOf('TIMED_OUT')).toBe('TIMED_OUT');
  });
});

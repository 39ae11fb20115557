/**
 * The timer rows by which a parent task and its child tasks hear of each other (facts/taskFamily.ts), as
 * a pure function of one fact's before and after.
 */
import { describe, expect, it } from 'vitest';
import { newTaskState } from '../src/core/facts/newRecords.ts';
import type { ExecutionRecord, StepRecord, TaskState } from '../src/core/facts/records.ts';
import { familyTimers } from '../src/core/facts/taskFamily.ts';

const at = new Date('2026-01-01T00:00:00Z');
let counter = 0;
const ids = { newId: () => `id-${++counter}` };

function task(parent: { taskId: string; stepId: string } | null): TaskState {
  return newTaskState(
    ids,
    {
      tenantId: 't',
      applicationId: 'a',
      workflowId: 'w',
      clientTaskKey: 'k',
      name: 'task',
      ownerId: null,
      snapshot: { definitionId: 'd', name: 'w', version: '1', steps: [] },
      steps: [
        { key: 'sub', operationCode: '', expectedProducer: null, dependsOn: [], failurePolicy: 'FAIL_TASK' },
      ],
      parent,
    },
    at,
  );
}
const withExecution = (state: TaskState, status: ExecutionRecord['status']): TaskState => ({
  ...state,
  execution: { ...state.execution, status },
});
const withStep = (state: TaskState, patch: Partial<StepRecord>): TaskState => ({
  ...state,
  steps: state.steps.map((s) => ({ ...s, ...patch })),
});

describe('familyTimers', () => {
  it('tells the parent once, when a child’s execution ends', () => {
    const running = withExecution(task({ taskId: 'parent', stepId: 'parent-step' }), 'RUNNING');
    const ended = withExecution(running, 'FAILED');
    expect(familyTimers(running, ended, ids.newId, at)).toEqual([
      expect.objectContaining({
        kind: 'CHILD_FINISHED',
        taskId: 'parent',
        stepId: 'parent-step',
        payload: { childTaskId: running.task.id, status: 'FAILED' },
        availableAt: at,
      }),
    ]);
    // A later fact about the ended child, or a fact that does not end it, tells nobody.
    expect(familyTimers(ended, ended, ids.newId, at)).toEqual([]);
    expect(familyTimers(running, running, ids.newId, at)).toEqual([]);
  });

  it('writes nothing for a task without a parent', () => {
    const running = withExecution(task(null), 'RUNNING');
    expect(familyTimers(running, withExecution(running, 'SUCCEEDED'), ids.newId, at)).toEqual([]);
  });

  it('tells the child when the step that waits for it is cancelled, and only then', () => {
    const waiting = withStep(withExecution(task(null), 'RUNNING'), {
      status: 'RUNNING',
      waitingFor: { kind: 'task', childTaskId: 'child', since: at.toISOString() },
    });
    const cancelled = withStep(waiting, { status: 'CANCELLED' });
    expect(familyTimers(waiting, cancelled, ids.newId, at)).toEqual([
      expect.objectContaining({
        kind: 'CANCEL_CHILD',
        taskId: 'child',
        stepId: null,
        payload: { parentTaskId: waiting.task.id, tenantId: 't', applicationId: 'a' },
      }),
    ]);
    // The child's own end (the step succeeds or fails with it) and a step already cancelled: nothing.
    expect(familyTimers(waiting, withStep(waiting, { status: 'SUCCEEDED' }), ids.newId, at)).toEqual([]);
    expect(familyTimers(waiting, withStep(waiting, { status: 'FAILED' }), ids.newId, at)).toEqual([]);
    expect(familyTimers(cancelled, cancelled, ids.newId, at)).toEqual([]);
    // A cancelled step of another kind has no child.
    const sleeping = withStep(waiting, {
      waitingFor: { kind: 'sleep', until: at.toISOString(), since: at.toISOString() },
    });
    expect(familyTimers(sleeping, withStep(sleeping, { status: 'CANCELLED' }), ids.newId, at)).toEqual([]);
  });
});

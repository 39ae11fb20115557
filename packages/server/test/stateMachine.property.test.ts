/**
 * Properties of the fact kernel's state machines over generated event sequences: the execution machine
 * never makes a forbidden transition or leaves a terminal state, a step attempt only moves forward, and a
 * task's version, execution progress and lifecycle never go back, whatever order the events come in.
 */
import type { ExecutionStatus, StepStatus } from '@tdp/protocol';
import fc from 'fast-check';
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
import { newTaskState } from '../src/core/facts/newRecords.ts';
import type { ExecutionRecord, TaskState } from '../src/core/facts/records.ts';
import {
  applyStepEvent,
  endTask,
  isRefusal,
  type StepEventInput,
  stepEventTypes,
  stepIsFinished,
  taskAfterStepChange,
} from '../src/core/facts/stateMachine.ts';

const statuses: ExecutionStatus[] = [
  'CREATED',
  'QUEUED',
  'RUNNING',
  'CANCELLING',
  'SUCCEEDED',
  'FAILED',
  'TIMED_OUT',
  'CANCELLED',
];
/** Whether the machine can get from one status to another through its allowed edges (one fact may take several). */
function reachable(from: ExecutionStatus, to: ExecutionStatus): boolean {
  const seen = new Set([from]);
  const queue = [from];
  while (queue.length > 0) {
    const current = queue.shift()!;
    for (const next of statuses) {
      if (!canTransition(current, next) || seen.has(next)) continue;
      if (next === to) return true;
      seen.add(next);
      queue.push(next);
    }
  }
  return false;
}

const terminalLifecycles = new Set(['SUCCEEDED', 'FAILED', 'TIMED_OUT', 'CANCELLED']);
const start = new Date('2026-01-01T00:00:00Z');
const tick = (i: number) => new Date(start.getTime() + (i + 1) * 1000);

let counter = 0;
const ids = { newId: () => `id-${++counter}` };

function freshTask(stepCount: number): TaskState {
  return newTaskState(
    ids,
    {
      tenantId: 't',
      applicationId: 'a',
      workflowId: 'w',
      clientTaskKey: 'k',
      name: 'task',
      ownerId: 'u',
      snapshot: { definitionId: 'd', name: 'w', version: '1', steps: [] },
      steps: Array.from({ length: stepCount }, (_, i) => ({
        key: `s${i}`,
        operationCode: 'OP',
        expectedProducer: 'p',
        dependsOn: [],
        failurePolicy: 'FAIL_TASK' as const,
      })),
    },
    start,
  );
}

/** What a step attempt may become from each status through a producer's event. */
const stepMoves: Record<StepStatus, readonly StepStatus[]> = {
  WAITING: ['RUNNING', 'SUCCEEDED', 'FAILED'],
  READY: ['RUNNING', 'SUCCEEDED', 'FAILED'],
  QUEUED: ['RUNNING', 'SUCCEEDED', 'FAILED'],
  RUNNING: ['RUNNING', 'SUCCEEDED', 'FAILED'],
  SUCCEEDED: [],
  FAILED: [],
  SKIPPED: [],
  CANCELLED: [],
};

const progressArbitrary = fc.option(
  fc.oneof(
    fc.record({ percent: fc.integer({ min: 0, max: 100 }) }),
    fc.record({ current: fc.nat(1000), total: fc.nat(1000) }),
  ),
  { nil: undefined },
);

type Action =
  | {
      kind: 'event';
      step: number;
      eventType: StepEventInput['eventType'];
      progress: StepEventInput['progress'];
    }
  | { kind: 'end'; outcome: 'SUCCEEDED' | 'FAILED' | 'CANCELLED' }
  | { kind: 'cancel' }
  | { kind: 'queue'; step: number };

const actionArbitrary = (steps: number): fc.Arbitrary<Action> =>
  fc.oneof(
    {
      weight: 6,
      arbitrary: fc.record({
        kind: fc.constant('event' as const),
        step: fc.integer({ min: 0, max: steps - 1 }),
        eventType: fc.constantFrom(...stepEventTypes),
        progress: progressArbitrary,
      }),
    },
    {
      weight: 1,
      arbitrary: fc.record({
        kind: fc.constant('end' as const),
        outcome: fc.constantFrom('SUCCEEDED' as const, 'FAILED' as const, 'CANCELLED' as const),
      }),
    },
    { weight: 1, arbitrary: fc.constant({ kind: 'cancel' as const }) },
    {
      weight: 2,
      arbitrary: fc.record({
        kind: fc.constant('queue' as const),
        step: fc.integer({ min: 0, max: steps - 1 }),
      }),
    },
  );

describe('the execution state machine (property)', () => {
  it('moves only along allowed edges, bumps the version once per move, and never leaves an end', () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.oneof(
            fc.record({ to: fc.constantFrom(...statuses) }),
            fc.record({ progress: fc.integer({ min: -5, max: 105 }) }),
          ),
          { maxLength: 30 },
        ),
        (moves) => {
          let execution: ExecutionRecord = freshTask(1).execution;
          moves.forEach((move, i) => {
            const before = execution;
            if ('to' in move) {
              const allowed = before.status === move.to || canTransition(before.status, move.to);
              let after: ExecutionRecord;
              try {
                after = transitionExecution(before, move.to, tick(i));
              } catch (error) {
                expect(error).toBeInstanceOf(TransitionRefused);
                expect(allowed).toBe(false);
                return;
              }
              expect(allowed).toBe(true);
              if (isTerminal(before.status)) expect(after).toBe(before);
              expect(after.version).toBe(before.status === move.to ? before.version : before.version + 1n);
              expect(isTerminal(after.status)).toBe(after.completedAt !== null);
              if (after.status === 'SUCCEEDED') expect(after.progress).toBe(100);
              if (before.startedAt) expect(after.startedAt).toEqual(before.startedAt);
              execution = after;
            } else {
              try {
                execution = setExecutionProgress(before, move.progress, tick(i));
              } catch {
                return;
              }
              expect(before.status).toBe('RUNNING');
              expect(execution.progress).toBeLessThanOrEqual(100);
            }
            expect(execution.progress).toBeGreaterThanOrEqual(before.progress);
            expect(execution.version).toBeGreaterThanOrEqual(before.version);
          });
        },
      ),
    );
  });

  it('plans a cancel that the machine accepts, from every status', () => {
    for (const status of statuses) {
      const plan = planCancel(status);
      if (plan.kind === 'transition') expect(canTransition(status, plan.to)).toBe(true);
      else if (plan.kind === 'refused') expect(isTerminal(status)).toBe(true);
    }
  });
});

describe('a task under arbitrary events (property)', () => {
  it('never regresses the task version, execution progress or lifecycle, and ends only once', () => {
    fc.assert(
      fc.property(
        fc
          .integer({ min: 1, max: 4 })
          .chain((steps) =>
            fc.tuple(fc.constant(steps), fc.array(actionArbitrary(steps), { maxLength: 40 })),
          ),
        ([stepCount, actions]) => {
          let state = freshTask(stepCount);
          let ends = 0;
          actions.forEach((action, i) => {
            const at = tick(i);
            const before = state;
            if (action.kind === 'event') {
              const step = before.steps[action.step]!;
              const changed = applyStepEvent(
                step,
                {
                  eventType: action.eventType,
                  producerId: 'p',
                  sourceSeq: i + 1,
                  progress: action.progress,
                },
                at,
              );
              if (isRefusal(changed)) {
                expect(
                  stepIsFinished(step.status) ||
                    (action.eventType === 'STEP_STARTED' && step.status === 'RUNNING'),
                ).toBe(true);
                return;
              }
              expect(stepMoves[step.status]).toContain(changed.status);
              expect(changed.version).toBe(step.version + 1n);
              const steps = before.steps.map((s, index) => (index === action.step ? changed : s));
              const moved = taskAfterStepChange(before.task, before.execution, steps, undefined, at);
              state = { ...moved, steps };
            } else if (action.kind === 'queue') {
              // The scheduler places a waiting step on a worker.
              const step = before.steps[action.step]!;
              if (step.status !== 'WAITING' && step.status !== 'READY') return;
              const steps = before.steps.map((s, index) =>
                index === action.step ? { ...s, status: 'QUEUED' as const, version: s.version + 1n } : s,
              );
              state = { ...taskAfterStepChange(before.task, before.execution, steps, undefined, at), steps };
            } else if (action.kind === 'end') {
              const ended = endTask(before.task, before.execution, action.outcome, {}, at);
              // Refused, never thrown: an execution that is over, or cancelling, does not end SUCCEEDED.
              if (isRefusal(ended)) {
                expect(canTransition(before.execution.status, action.outcome)).toBe(false);
                return;
              }
              ends += 1;
              state = { ...ended, steps: before.steps };
            } else {
              const plan = planCancel(before.execution.status);
              if (plan.kind !== 'transition') return;
              state = { ...before, execution: transitionExecution(before.execution, plan.to, at) };
            }
            const { task, execution } = state;
            if (state.task !== before.task) expect(task.version).toBe(before.task.version + 1n);
            expect(execution.version).toBeGreaterThanOrEqual(before.execution.version);
            expect(execution.progress).toBeGreaterThanOrEqual(before.execution.progress);
            if (execution.status !== before.execution.status)
              expect(reachable(before.execution.status, execution.status)).toBe(true);
            if (isTerminal(before.execution.status)) expect(execution.status).toBe(before.execution.status);
            if (state.task !== before.task) {
              expect(task.lifecycleStatus).toBe(lifecycleOf(execution.status));
              if (terminalLifecycles.has(before.task.lifecycleStatus))
                expect(task.lifecycleStatus).toBe(before.task.lifecycleStatus);
              if (before.task.startedAt) expect(task.startedAt).toEqual(before.task.startedAt);
            }
          });
          expect(ends).toBeLessThanOrEqual(1);
        },
      ),
      { numRuns: 300 },
    );
  });
});

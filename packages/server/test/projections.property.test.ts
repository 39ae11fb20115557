/**
 * Properties of the workflow projection over generated task moves: the counts per lifecycle always add
 * up to the workflow's tasks and match them, the version rises by one per change, and the workflow's
 * lifecycle is the one its tasks give.
 */
import type { LifecycleStatus } from '@tdp/protocol';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { newWorkflowRecord } from '../src/core/facts/newRecords.ts';
import { workflowAfterTaskChange } from '../src/core/facts/projections.ts';

const ended: readonly LifecycleStatus[] = ['SUCCEEDED', 'FAILED', 'TIMED_OUT', 'CANCELLED'];
/** Where a task's lifecycle may go next; an ended task goes back to PENDING only when retried. */
const next: Record<LifecycleStatus, readonly LifecycleStatus[]> = {
  PENDING: ['RUNNING', ...ended],
  RUNNING: ended,
  SUCCEEDED: ['PENDING'],
  FAILED: ['PENDING'],
  TIMED_OUT: ['PENDING'],
  CANCELLED: ['PENDING'],
};

describe('the workflow projection (property)', () => {
  it('keeps its counts equal to its tasks and its lifecycle the one they give', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 4 }),
        fc.array(fc.record({ add: fc.boolean(), task: fc.nat(), to: fc.nat() }), { maxLength: 40 }),
        (initial, moves) => {
          const at = new Date('2026-01-01T00:00:00Z');
          let workflow = newWorkflowRecord(
            { newId: () => 'w' },
            {
              tenantId: 't',
              applicationId: 'a',
              clientWorkflowKey: 'k',
              ownerId: null,
              title: 'w',
              workflowType: null,
              requestHash: 'h',
              taskCount: initial,
            },
            at,
          );
          const tasks: LifecycleStatus[] = Array.from({ length: initial }, () => 'PENDING');
          for (const move of moves) {
            const before = workflow;
            if (move.add || tasks.length === 0) {
              tasks.push('PENDING');
              workflow = workflowAfterTaskChange(workflow, null, 'PENDING', at);
            } else {
              const index = move.task % tasks.length;
              const from = tasks[index]!;
              const to = next[from][move.to % next[from].length]!;
              tasks[index] = to;
              workflow = workflowAfterTaskChange(workflow, from, to, at);
            }
            expect(workflow.version).toBe(before.version + 1n);
            expect(workflow.taskCount).toBe(tasks.length);
            const counted: Partial<Record<LifecycleStatus, number>> = {};
            for (const status of tasks) counted[status] = (counted[status] ?? 0) + 1;
            expect(workflow.taskCounts).toEqual(counted);
            const allEnded = tasks.every((s) => ended.includes(s));
            expect(ended.includes(workflow.lifecycleStatus)).toBe(allEnded);
            if (tasks.includes('RUNNING')) expect(workflow.lifecycleStatus).toBe('RUNNING');
            if (allEnded && tasks.includes('FAILED')) expect(workflow.lifecycleStatus).toBe('FAILED');
          }
        },
      ),
      { numRuns: 300 },
    );
  });
});

import { describe, expect, it } from 'vitest';
import { factStatements } from '../src/adapters/outbound/postgres/factStore.ts';
import { mergeWrites } from '../src/adapters/outbound/postgres/mergeWrites.ts';
import type { FactWriteSet } from '../src/core/facts/writeSet.ts';

// Only the fields the merge looks at matter here; the rest of each record is carried along untouched.
const task = (id: string, version: number) => ({ id, version: BigInt(version) }) as never;
const execution = (id: string, taskId: string, progress: number) => ({ id, taskId, progress }) as never;
const step = (id: string, status: string) => ({ id, status }) as never;
const event = (id: string) => ({ id }) as never;
const fact = (write: Partial<FactWriteSet>): FactWriteSet => ({
  events: [],
  outbox: [],
  realtime: [],
  ...write,
});

describe('mergeWrites: the facts of one batch as one set of rows per table', () => {
  it('writes a row touched by several facts once, in its last state', () => {
    const merged = mergeWrites([
      fact({ task: task('t1', 2), execution: execution('e1', 't1', 0), events: [event('a')] }),
      fact({ task: task('t2', 5), events: [event('b')] }),
      fact({ task: task('t1', 3), execution: execution('e1', 't1', 100), events: [event('c')] }),
      fact({ task: task('t1', 4), events: [event('d')] }),
    ]);
    expect(merged.tasks.map((t) => [t.id, t.version])).toEqual([
      ['t1', 4n],
      ['t2', 5n],
    ]);
    expect(merged.executions.map((e) => e.progress)).toEqual([100]);
    expect(merged.events.map((e) => e.id)).toEqual(['a', 'b', 'c', 'd']);
  });

  it('inserts a row created and then changed in the same batch as changed, with no separate update', () => {
    const merged = mergeWrites([
      fact({
        newTask: { task: task('t1', 1), execution: execution('e1', 't1', 0) },
        newSteps: [step('s1', 'READY')],
      }),
      fact({ task: task('t1', 2), execution: execution('e1', 't1', 10), steps: [step('s1', 'QUEUED')] }),
      fact({ steps: [step('s0', 'SUCCEEDED')] }),
    ]);
    expect(merged.newTasks).toHaveLength(1);
    expect(merged.newTasks[0]!.task).toMatchObject({ version: 2n });
    expect(merged.newTasks[0]!.execution).toMatchObject({ progress: 10 });
    expect(merged.tasks).toEqual([]);
    expect(merged.executions).toEqual([]);
    expect(merged.newSteps.map((s) => s.status)).toEqual(['QUEUED']);
    expect(merged.steps.map((s) => s.id)).toEqual(['s0']);
  });

  it('collects revocations once and closes scheduling requests per status', () => {
    const merged = mergeWrites([
      fact({
        revokeAttemptIds: ['x', 'y'],
        closeSchedulingRequests: { stepIds: ['s1'], status: 'DISPATCHED' },
      }),
      fact({
        revokeAttemptIds: ['y', 'z'],
        closeSchedulingRequests: { stepIds: ['s2'], status: 'CANCELLED' },
      }),
      fact({ closeSchedulingRequests: { stepIds: ['s3'], status: 'DISPATCHED' } }),
    ]);
    expect(merged.revokeAttemptIds).toEqual(['x', 'y', 'z']);
    expect(merged.closeSchedulingRequests).toEqual([
      ['DISPATCHED', ['s1', 's3']],
      ['CANCELLED', ['s2']],
    ]);
  });

  it("keeps every transaction's idempotency claim (a group commit merges several), in order", () => {
    const claim = (key: string) => ({ principal: 'p', operation: 'o', key }) as never;
    const merged = mergeWrites([
      fact({ idempotency: claim('a') }),
      fact({}),
      fact({ idempotency: claim('b') }),
    ]);
    expect(merged.idempotency.map((c) => c.key)).toEqual(['a', 'b']);
  });
});

describe('factStatements: one statement touches a row once', () => {
  const at = new Date('2026-01-01T00:00:00Z');
  const attempt = (id: string) =>
    ({ id, taskId: 't', stepId: 's', allowedEventTypes: [], revokedAt: null, createdAt: at }) as never;
  const request = (id: string, stepId: string) =>
    ({ id, taskId: 't', stepId, priority: 50, availableAt: at, createdAt: at }) as never;
  const rowsOf = (statements: ReturnType<typeof factStatements>, table: string) =>
    statements
      .filter((s) => s.text.includes(table))
      .map((s) => [/\b(INSERT|UPDATE|DELETE)\b/.exec(s.text)?.[1], JSON.parse(s.rows)]);

  it('revokes an attempt inserted by the same batch in its own row, and the others by UPDATE', () => {
    const statements = factStatements([
      fact({ attempts: [attempt('a1')], events: [{ id: 'e', receivedAt: at } as never] }),
      fact({ revokeAttemptIds: ['a1', 'a0'] }),
    ]);
    const [insert, update] = rowsOf(statements, 'attempt');
    expect(insert![0]).toBe('INSERT');
    expect(insert![1]).toMatchObject([{ id: 'a1', revoked_at: at.toISOString() }]);
    expect(update).toEqual(['UPDATE', [{ id: 'a0', revoked_at: at.toISOString() }]]);
  });

  it('writes a request closed by the batch that opened it as closed; a step closed twice keeps its first status', () => {
    const statements = factStatements([
      fact({ schedulingRequests: [request('r1', 's1'), request('r2', 's2')] }),
      fact({ closeSchedulingRequests: { stepIds: ['s1', 's9'], status: 'DISPATCHED' } }),
      fact({ closeSchedulingRequests: { stepIds: ['s9'], status: 'CANCELLED' } }),
    ]);
    const [insert, update] = rowsOf(statements, 'scheduling_request');
    expect(insert![1].map((r: { step_id: string; status: string }) => [r.step_id, r.status])).toEqual([
      ['s1', 'DISPATCHED'],
      ['s2', 'PENDING'],
    ]);
    expect(update).toEqual(['UPDATE', [{ step_id: 's9', status: 'DISPATCHED' }]]);
  });
});

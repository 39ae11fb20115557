/** The pure rule of what a schedule's round does (docs/schedules.md, "The rule for late fires and overlap"). */
import type { ScheduleOverlap } from '@tdp/protocol';
import { describe, expect, it } from 'vitest';
import { decideFires, fireInput } from '../src/core/schedules/firePolicy.ts';

const due = new Date('2030-01-01T03:00:00Z');
const queued = new Date('2030-01-01T02:00:00Z');
const decide = (overlap: ScheduleOverlap, rest: Partial<Parameters<typeof decideFires>[0]> = {}) =>
  decideFires({ overlap, due, late: false, previousRunning: false, queuedFireAt: null, ...rest });

describe('decideFires', () => {
  it('starts an on-time fire under every policy when nothing runs', () => {
    for (const overlap of ['SKIP', 'QUEUE_ONE', 'ALLOW'] as const) {
      expect(decide(overlap)).toEqual({ start: [due], queuedFireAt: null });
    }
  });

  it('skips a late fire under SKIP and catches it up once under QUEUE_ONE and ALLOW', () => {
    expect(decide('SKIP', { late: true }).start).toEqual([]);
    expect(decide('QUEUE_ONE', { late: true }).start).toEqual([due]);
    expect(decide('ALLOW', { late: true }).start).toEqual([due]);
  });

  it('while the previous task runs: SKIP drops, QUEUE_ONE queues one, ALLOW starts', () => {
    expect(decide('SKIP', { previousRunning: true })).toEqual({ start: [], queuedFireAt: null });
    expect(decide('QUEUE_ONE', { previousRunning: true })).toEqual({ start: [], queuedFireAt: due });
    expect(decide('ALLOW', { previousRunning: true })).toEqual({ start: [due], queuedFireAt: null });
  });

  it('keeps the first queued fire while the previous task runs, and starts it once that task ended', () => {
    expect(decide('QUEUE_ONE', { previousRunning: true, queuedFireAt: queued })).toEqual({
      start: [],
      queuedFireAt: queued,
    });
    // The queued fire starts; it is now the running task, so the due fire is queued behind it.
    expect(decide('QUEUE_ONE', { queuedFireAt: queued })).toEqual({ start: [queued], queuedFireAt: due });
    expect(decide('QUEUE_ONE', { due: null, queuedFireAt: queued })).toEqual({
      start: [queued],
      queuedFireAt: null,
    });
  });
});

describe('fireInput', () => {
  it('fills the placeholders at any depth and leaves everything else as it is', () => {
    const fireAt = new Date('2030-01-01T03:00:00Z');
    expect(
      fireInput(
        {
          at: '$.schedule.fireTime',
          list: [{ id: '$.schedule.id' }, 'x', 3, null],
          near: '$.schedule.fireTimes',
        },
        { scheduleId: 's-1', fireAt },
      ),
    ).toEqual({
      at: '2030-01-01T03:00:00.000Z',
      list: [{ id: 's-1' }, 'x', 3, null],
      near: '$.schedule.fireTimes',
    });
  });
});

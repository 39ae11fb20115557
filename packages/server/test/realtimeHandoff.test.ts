/**
 * The hand-off's marking (core/realtime/handoff.ts): a commit's records share one realtime_outbox row,
 * which is marked PUBLISHED once every one of them went — across publish batches — and left for the
 * relay's loop when any failed or the publisher threw.
 */
import { describe, expect, it } from 'vitest';
import type { RealtimeRecord } from '../src/core/facts/records.ts';
import { RealtimeHandoff } from '../src/core/realtime/handoff.ts';
import type { RealtimeMessage } from '../src/core/realtime/relay.ts';

let sequence = 0;
const record = (outboxId: string, channel: string): RealtimeRecord => ({
  id: `m${++sequence}`,
  outboxId,
  tenantId: 't',
  aggregateType: 'TASK',
  aggregateId: `task-${sequence}`,
  aggregateVersion: 1n,
  channel,
  projection: 'USER_SUMMARY',
  // A status change each: nothing is coalesced away.
  payload: { kind: 'task.summary', lifecycleStatus: 'RUNNING', taskId: `task-${sequence}` },
  createdAt: new Date(),
});

function handoff(options: {
  refuse?: (m: RealtimeMessage) => boolean;
  throws?: boolean;
  batchSize?: number;
}) {
  const marked: string[][] = [];
  const sent: string[] = [];
  const errors: unknown[] = [];
  const subject = new RealtimeHandoff({
    publisher: {
      publish: async (messages) => {
        if (options.throws) throw new Error('gateway down');
        sent.push(...messages.map((m) => m.channel));
        return messages.map((m) =>
          options.refuse?.(m) ? { ok: false, permanent: false, error: 'busy' } : { ok: true },
        );
      },
    },
    rows: { markPublishedUnclaimed: async (ids) => void marked.push(ids) },
    clock: { now: () => new Date() },
    onError: (error) => errors.push(error),
    ...(options.batchSize ? { batchSize: options.batchSize } : {}),
  });
  return { subject, marked, sent, errors };
}

describe('the realtime hand-off', () => {
  it("marks a commit's row once all its records went, even when they were published in several batches", async () => {
    const { subject, marked, sent } = handoff({ batchSize: 2 });
    subject.take([record('A', 'a1'), record('A', 'a2'), record('A', 'a3')]);
    subject.take([record('B', 'b1')]);
    await subject.idle();
    expect(sent).toEqual(['a1', 'a2', 'a3', 'b1']);
    expect(marked.flat().sort()).toEqual(['A', 'B']);
  });

  it('leaves the row of a commit one of whose records failed to the loop, and marks the others', async () => {
    const { subject, marked } = handoff({ refuse: (m) => m.channel === 'a2' });
    subject.take([record('A', 'a1'), record('A', 'a2'), record('A', 'a3')]);
    subject.take([record('B', 'b1'), record('B', 'b2')]);
    await subject.idle();
    expect(marked.flat()).toEqual(['B']);
  });

  it('marks nothing when the publisher throws; the next commit is marked as usual', async () => {
    const options = { throws: true };
    const { subject, marked, errors } = handoff(options);
    subject.take([record('A', 'a1'), record('A', 'a2')]);
    await subject.idle();
    expect(marked).toEqual([]);
    expect(errors).toHaveLength(1);
    options.throws = false;
    subject.take([record('C', 'c1')]);
    await subject.idle();
    expect(marked.flat()).toEqual(['C']);
  });

  it('times each message it sent from when it was handed over (its commit), apart from its fact time, and only those it sent', async () => {
    let now = 1_000_000;
    const observed: { fromFact: number[]; fromCommit: number[] } = { fromFact: [], fromCommit: [] };
    const subject = new RealtimeHandoff({
      publisher: {
        publish: async (messages) => {
          now += 7; // the gateway takes 7 ms
          return messages.map((m) =>
            m.channel === 'refused' ? { ok: false, permanent: false, error: 'busy' } : { ok: true },
          );
        },
      },
      clock: { now: () => new Date(now) },
      observer: {
        published: (committedAt, at) => observed.fromFact.push(at.getTime() - committedAt.getTime()),
        handedOff: (takenAt, at) => observed.fromCommit.push(at.getTime() - takenAt.getTime()),
      },
    });
    // The fact's time is its transaction's start, 12 ms before the commit handed it over.
    const fact = (channel: string) => ({ ...record('A', channel), createdAt: new Date(now - 12) });
    subject.take([fact('a1'), fact('refused')]);
    await subject.idle();
    expect(observed).toEqual({ fromFact: [19], fromCommit: [7] });
  });
});

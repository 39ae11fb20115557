/**
 * The group commit's own rules, with a `send` the test controls (statusStore.test.ts runs it on
 * PostgreSQL): who goes out together, and that a statement which never settles cannot hold every place.
 */
import { describe, expect, it } from 'vitest';
import { GroupCommit } from '../src/adapters/outbound/postgres/groupCommit.ts';
import type { FactWriteSet } from '../src/core/facts/writeSet.ts';

const writes = (key: string): FactWriteSet[] => [
  {
    idempotency: {
      principal: 'p',
      operation: 'o',
      key,
      requestHash: 'h',
      responseStatus: 201,
      responseBody: {},
      createdAt: new Date(),
    },
    events: [],
    outbox: [],
    realtime: [],
  },
];
const keysOf = (sent: FactWriteSet[]) => sent.map((w) => w.idempotency?.key);

describe('group commit', () => {
  it('sends the first at once and those that arrive meanwhile together, in their order', async () => {
    const sends: string[][] = [];
    let finishFirst!: () => void;
    const group = new GroupCommit(
      (sent) => {
        sends.push(keysOf(sent) as string[]);
        return sends.length === 1 ? new Promise<void>((r) => (finishFirst = r)) : Promise.resolve();
      },
      { maxInFlight: 1, maxMembers: 64, settleWithinMs: 10_000 },
    );
    const first = group.commit(writes('a'));
    const rest = ['b', 'c', 'd'].map((key) => group.commit(writes(key)));
    expect(sends).toEqual([['a']]);
    finishFirst();
    await Promise.all([first, ...rest]);
    expect(sends).toEqual([['a'], ['b', 'c', 'd']]);
  });

  it('a statement that never settles fails its members after the deadline and gives its place up', async () => {
    let calls = 0;
    const group = new GroupCommit(
      () => {
        calls += 1;
        return calls === 1 ? new Promise<void>(() => {}) : Promise.resolve();
      },
      { maxInFlight: 1, maxMembers: 64, settleWithinMs: 50 },
    );
    const stuck = group.commit(writes('a'));
    const next = group.commit(writes('b'));
    await expect(stuck).rejects.toMatchObject({ code: 'DATABASE_ANSWER_TIMEOUT' });
    // Without the deadline, `next` would wait behind the stuck statement for ever.
    await expect(next).resolves.toBeUndefined();
    expect(calls).toBe(2);
  });

  it("a group refused for one member's rows is sent again member by member; other failures are everyone's", async () => {
    const sends: string[][] = [];
    let release!: () => void;
    let held = new Promise<void>((r) => (release = r));
    const group = new GroupCommit(
      async (sent) => {
        const keys = keysOf(sent) as string[];
        sends.push(keys);
        if (keys[0] === 'hold') return held;
        if (keys.includes('taken')) throw Object.assign(new Error('duplicate key'), { code: '23505' });
        if (keys.includes('lost')) throw Object.assign(new Error('gone'), { code: 'CONNECTION_CLOSED' });
      },
      { maxInFlight: 1, maxMembers: 64, settleWithinMs: 10_000 },
    );
    const hold = group.commit(writes('hold'));
    const outcomes = Promise.allSettled(['x', 'taken', 'y'].map((key) => group.commit(writes(key))));
    release();
    await hold;
    expect((await outcomes).map((o) => o.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect(sends.slice(1)).toEqual([['x', 'taken', 'y'], ['x'], ['taken'], ['y']]);

    // A lost connection is no member's fault: the whole group fails, and nothing is sent again.
    held = new Promise<void>((r) => (release = r));
    await new Promise((r) => setTimeout(r, 0)); // the last group's place is free again
    const holdAgain = group.commit(writes('hold'));
    const lost = Promise.allSettled([group.commit(writes('lost')), group.commit(writes('z'))]);
    release();
    await holdAgain;
    expect((await lost).map((o) => o.status)).toEqual(['rejected', 'rejected']);
    expect(sends.slice(5)).toEqual([['hold'], ['lost', 'z']]);
  });
});

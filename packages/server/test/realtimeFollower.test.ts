/**
 * The committed-projection follower (core/realtime/follower.ts) on a real PostgreSQL: each replica reads
 * the realtime rows that became visible since its last snapshot, so a transaction that began first but
 * commits last is neither missed nor waited for, nothing is read twice, and a window larger than a page
 * is read page by page without losing what commits meanwhile.
 */
import { newId } from '@tdp/protocol';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase } from '../../../test/database.ts';
import { PostgresCommittedProjections } from '../src/adapters/outbound/postgres/committedProjections.ts';
import type { Queryable, Sql } from '../src/adapters/outbound/postgres/database.ts';
import { insertRealtime } from '../src/adapters/outbound/postgres/realtimeOutbox.ts';
import { CommittedProjectionFollower } from '../src/core/realtime/follower.ts';
import type { RealtimeMessage } from '../src/core/realtime/relay.ts';
import { connectDatabase } from '../src/main.ts';

let database: Awaited<ReturnType<typeof createTestDatabase>>;
let sql: Sql;

beforeAll(async () => {
  database = await createTestDatabase();
  sql = connectDatabase({ url: database.url, maxConnections: 4 });
});
afterAll(async () => {
  await sql?.end();
  await database?.drop();
});

/** One realtime row, of one message, as a fact's transaction writes it. */
const insertRow = (tx: Queryable, label: string) =>
  insertRealtime(tx, [
    {
      id: newId(),
      tenantId: newId(),
      aggregateType: 'TASK',
      aggregateId: newId(),
      aggregateVersion: 1n,
      channel: 'task_user:t/a/u',
      projection: 'USER_SUMMARY',
      payload: { label },
      createdAt: new Date(),
    },
  ]);

/**
 * A follower delivering into a list of labels; `gating` is its listening check and grace, and
 * `beforeSnapshot` runs as each snapshot is about to be taken.
 */
function followerWith(
  batchSize: number,
  gating: { listening: () => boolean; idleAfterMs: number; now: () => number } | null = null,
  beforeSnapshot?: () => Promise<void>,
) {
  const delivered: string[] = [];
  const committed = new PostgresCommittedProjections(sql);
  const follower = new CommittedProjectionFollower({
    reads: {
      snapshot: async () => {
        await beforeSnapshot?.();
        return committed.snapshot();
      },
      committed: (window, limit) => committed.committed(window, limit),
    },
    local: {
      publish: async (messages: RealtimeMessage[]) => {
        for (const message of messages) delivered.push((message.data as { label: string }).label);
        return messages.map(() => ({ ok: true as const }));
      },
    },
    batchSize,
    ...gating,
  });
  /** Rounds until one delivers nothing. */
  const drain = async () => {
    while ((await follower.round()) > 0);
  };
  return { follower, delivered, drain };
}

describe('the committed-projection follower', () => {
  it('starts at what is committed, then reads each commit once — a long transaction when it ends, without holding back the others', async () => {
    await insertRow(sql, 'before-start');
    const { follower, delivered, drain } = followerWith(100);
    await follower.begin();

    // The long transaction writes first (and so has the older transaction id), but commits last.
    let commitLong = () => {};
    const longHeld = new Promise<void>((resolve) => {
      commitLong = resolve;
    });
    let written = () => {};
    const longWritten = new Promise<void>((resolve) => {
      written = resolve;
    });
    const long = sql.begin(async (tx) => {
      await insertRow(tx, 'long');
      written();
      await longHeld;
    });
    await longWritten;
    await insertRow(sql, 'short-1');
    await insertRow(sql, 'short-2');
    await drain();
    expect(delivered).toEqual(['short-1', 'short-2']);

    commitLong();
    await long;
    await drain();
    expect(delivered).toEqual(['short-1', 'short-2', 'long']);
    await drain();
    expect(delivered).toHaveLength(3);

    // A transaction that rolls back leaves nothing to deliver.
    await sql
      .begin(async (tx) => {
        await insertRow(tx, 'rolled-back');
        throw new Error('roll back');
      })
      .catch(() => {});
    await insertRow(sql, 'after');
    await drain();
    expect(delivered).toEqual(['short-1', 'short-2', 'long', 'after']);
  });

  it('reads a window larger than a page page by page; what commits meanwhile comes in the next window', async () => {
    const { follower, delivered } = followerWith(2);
    await follower.begin();
    for (const label of ['p1', 'p2', 'p3', 'p4', 'p5']) await insertRow(sql, label);
    expect(await follower.round()).toBe(2);
    // Commits while the window is being paged: not lost, not mixed into this window's order.
    await insertRow(sql, 'late');
    expect(await follower.round()).toBe(2);
    expect(await follower.round()).toBe(1);
    expect(delivered).toEqual(['p1', 'p2', 'p3', 'p4', 'p5']);
    expect(await follower.round()).toBe(1);
    expect(delivered.at(-1)).toBe('late');
    expect(await follower.round()).toBe(0);
  });

  it('reads nothing while nobody listens past the grace, and what commits once a client is back', async () => {
    let listening = true;
    let now = 0;
    const { follower, delivered, drain } = followerWith(100, {
      listening: () => listening,
      idleAfterMs: 60_000,
      now: () => now,
    });
    await follower.begin();
    await drain();
    // The last stream closes: within the grace the follower still reads (a reconnect resumes).
    listening = false;
    now += 30_000;
    await insertRow(sql, 'within-grace');
    await drain();
    expect(delivered).toEqual(['within-grace']);
    // Past it, what commits is not read at all.
    now += 60_000;
    await insertRow(sql, 'nobody-listens');
    await drain();
    expect(delivered).toEqual(['within-grace']);
    // A client again: what commits from now on reaches it; what was skipped stays skipped.
    listening = true;
    await insertRow(sql, 'back');
    await drain();
    expect(delivered).toEqual(['within-grace', 'back']);
  });

  it('reads nothing until its first client (a replica nobody listened to has no stream to resume), and misses nothing of a client that comes as it skips', async () => {
    let listening = false;
    let now = 0;
    let onSnapshot: (() => Promise<void>) | null = null;
    const { follower, delivered, drain } = followerWith(
      100,
      { listening: () => listening, idleAfterMs: 60_000, now: () => now },
      async () => {
        const hook = onSnapshot;
        onSnapshot = null;
        await hook?.();
      },
    );
    await follower.begin();
    await insertRow(sql, 'nobody-yet');
    now += 1_000;
    await drain();
    expect(delivered).toEqual([]);
    // A stream opens while the follower takes its idle snapshot, and a change commits before that
    // snapshot but after the stream read its state: it must still reach the stream.
    onSnapshot = async () => {
      listening = true;
      await insertRow(sql, 'as-the-client-came');
    };
    await drain();
    await drain();
    expect(delivered).toEqual(['as-the-client-came']);
  });
});

import { newId } from '@tdp/protocol';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createTestDatabase } from '../../../test/database.ts';
import { type Harness, startHarness, TestClock, zipWorkflow } from '../../../test/harness.ts';
import { InProcessBus } from '../src/adapters/outbound/bus/inProcessBus.ts';
import { consumeOnce } from '../src/adapters/outbound/postgres/consumerInbox.ts';
import { PostgresOutboxQueue } from '../src/adapters/outbound/postgres/outboxQueue.ts';
import { dispatchOutboxBatch } from '../src/core/outbox/dispatchOutbox.ts';
import type { DomainEvent, EventPublisher, OutboxQueue } from '../src/core/outbox/ports.ts';
import { connectDatabase } from '../src/main.ts';

let database: Awaited<ReturnType<typeof createTestDatabase>>;
let sql: ReturnType<typeof connectDatabase>;
const tenantId = newId();
const applicationId = newId();

async function addEvents(n: number, at: Date): Promise<string[]> {
  const ids = Array.from({ length: n }, () => newId());
  for (const id of ids) {
    await sql`
      INSERT INTO outbox_event (id, tenant_id, application_id, aggregate_id, event_type, payload, available_at, created_at)
      VALUES (${id}, ${tenantId}, ${applicationId}, ${newId()}, 'TASK_CREATED', ${sql.json({ id })}, ${at}, ${at})`;
  }
  return ids;
}

/** A consumer that applies each event once: it counts applications per event id in its own table. */
function countingConsumer(name: string) {
  return async (event: DomainEvent) => {
    await consumeOnce(sql, name, event.id, new Date(), async (tx) => {
      await tx`INSERT INTO applied (event_id, times) VALUES (${event.id}, 1)
               ON CONFLICT (event_id) DO UPDATE SET times = applied.times + 1`;
    });
  };
}

beforeAll(async () => {
  database = await createTestDatabase();
  sql = connectDatabase({ url: database.url, maxConnections: 4 });
  await sql`CREATE TABLE applied (event_id uuid PRIMARY KEY, times integer NOT NULL)`;
});
afterAll(async () => {
  await sql.end();
  await database.drop();
});
beforeEach(async () => {
  await sql`TRUNCATE outbox_event, consumer_inbox, applied`;
});

describe('outbox claim, lease and retry', () => {
  it('delivers again after a crash between publishing and marking, and the consumer applies it once', async () => {
    const clock = new TestClock(new Date('2026-01-01T00:00:00Z'));
    const [id] = await addEvents(1, clock.now());
    const bus = new InProcessBus();
    const deliveries: string[] = [];
    bus.subscribe((event) => {
      deliveries.push(event.id);
    });
    bus.subscribe(countingConsumer('projection'));

    // The first dispatcher publishes, then "dies" before it can record the publication.
    const queue = new PostgresOutboxQueue(sql);
    const crashing: OutboxQueue = {
      claim: (now, limit) => queue.claim(now, limit),
      markPublished: () => Promise.reject(new Error('process killed')),
      markFailed: (...args) => queue.markFailed(...args),
      nextDueAt: () => queue.nextDueAt(),
    };
    await expect(dispatchOutboxBatch({ queue: crashing, publisher: bus, clock }, 10)).rejects.toThrow(
      'process killed',
    );
    expect(deliveries).toEqual([id]);

    // Within the lease nobody takes it; after the lease it is delivered again with the same id.
    expect((await dispatchOutboxBatch({ queue, publisher: bus, clock }, 10)).claimed).toBe(0);
    clock.advance(60_001);
    const report = await dispatchOutboxBatch({ queue, publisher: bus, clock }, 10);
    expect(report).toMatchObject({ claimed: 1, published: 1 });
    expect(deliveries).toEqual([id, id]);
    const [applied] = await sql`SELECT times FROM applied WHERE event_id = ${id!}`;
    expect(applied!.times).toBe(1);
    const [row] = await sql`SELECT status, attempts FROM outbox_event WHERE id = ${id!}`;
    expect(row).toMatchObject({ status: 'PUBLISHED', attempts: 2 });
  });

  it('lets a second dispatcher take over an expired lease; the first can no longer mark the rows', async () => {
    const start = new Date('2026-01-01T00:00:00Z');
    const ids = await addEvents(3, start);
    const a = new PostgresOutboxQueue(sql);
    const b = new PostgresOutboxQueue(sql);
    const claimedByA = await a.claim(start, 10);
    expect(claimedByA.map((r) => r.id).sort()).toEqual([...ids].sort());
    expect(await b.claim(new Date(start.getTime() + 59_000), 10)).toEqual([]);

    const claimedByB = await b.claim(new Date(start.getTime() + 60_000), 10);
    expect(claimedByB).toHaveLength(3);
    expect(claimedByB[0]!.claimId).not.toBe(claimedByA[0]!.claimId);
    expect(claimedByB.every((r) => r.attempts === 2)).toBe(true);

    const late = new Date(start.getTime() + 61_000);
    expect(await a.markPublished(claimedByA[0]!.claimId, ids, late)).toEqual([]);
    expect(await a.markFailed(claimedByA[0]!.claimId, ids[0]!, 1, 'late', late)).toBeNull();
    expect((await b.markPublished(claimedByB[0]!.claimId, ids, late)).sort()).toEqual([...ids].sort());
    expect(await b.claim(new Date(start.getTime() + 3_600_000), 10)).toEqual([]);
  });

  it('claims expired leases and due rows in one batch, oldest first, never past the limit', async () => {
    const start = new Date('2026-01-01T00:00:00Z');
    const leased = await addEvents(3, start);
    const queue = new PostgresOutboxQueue(sql);
    expect(await queue.claim(start, 10)).toHaveLength(3);
    const later = await addEvents(3, new Date(start.getTime() + 30_000));
    // At 60 s the three leases have expired and the three later rows are due: the oldest four come.
    const claimed = await queue.claim(new Date(start.getTime() + 60_000), 4);
    expect(claimed).toHaveLength(4);
    expect(claimed.filter((r) => leased.includes(r.id))).toHaveLength(3);
    expect(claimed.filter((r) => later.includes(r.id))).toHaveLength(1);
    expect(await queue.claim(new Date(start.getTime() + 60_000), 10)).toHaveLength(2);
  });

  it('skips rows another dispatcher holds right now (SKIP LOCKED), so claims never overlap', async () => {
    const now = new Date('2026-01-01T00:00:00Z');
    await addEvents(40, now);
    const queue = new PostgresOutboxQueue(sql);
    const batches = await Promise.all(Array.from({ length: 4 }, () => queue.claim(now, 15)));
    const all = batches.flat().map((r) => r.id);
    expect(all).toHaveLength(40);
    expect(new Set(all).size).toBe(40);
  });

  it('backs off 2^attempts seconds after failures and goes DEAD after 20 attempts', async () => {
    const clock = new TestClock(new Date('2026-01-01T00:00:00Z'));
    const [id] = await addEvents(1, clock.now());
    const failing: EventPublisher = { publish: () => Promise.reject(new Error('broker down')) };
    const queue = new PostgresOutboxQueue(sql);
    for (let attempt = 1; attempt <= 20; attempt += 1) {
      const report = await dispatchOutboxBatch({ queue, publisher: failing, clock }, 10);
      expect(report.claimed).toBe(1);
      const [row] =
        await sql`SELECT status, attempts, available_at, last_error FROM outbox_event WHERE id = ${id!}`;
      expect(row!.attempts).toBe(attempt);
      expect(row!.last_error).toBe('broker down');
      if (attempt < 20) {
        expect(row!.status).toBe('FAILED');
        const waitMs = Math.min(2 ** attempt, 1024) * 1000;
        expect(row!.available_at.getTime() - clock.now().getTime()).toBe(waitMs);
        // Not due a moment before the back-off ends, due right at it.
        clock.advance(waitMs - 1);
        expect((await queue.claim(clock.now(), 10)).length).toBe(0);
        clock.advance(1);
        expect((await queue.nextDueAt())?.getTime()).toBe(clock.now().getTime());
      } else {
        expect(row!.status).toBe('DEAD');
        expect(report.dead).toBe(1);
      }
    }
    clock.advance(10 * 24 * 3600 * 1000);
    expect(await queue.claim(clock.now(), 10)).toEqual([]);
    expect(await queue.nextDueAt()).toBeNull();
  });

  it('records successes and failures of one batch separately', async () => {
    const clock = new TestClock(new Date('2026-01-01T00:00:00Z'));
    const ids = await addEvents(4, clock.now());
    const refused = new Set([ids[1], ids[3]]);
    const picky: EventPublisher = {
      publish: async (event) => {
        if (refused.has(event.id)) throw new Error('rejected');
      },
    };
    const report = await dispatchOutboxBatch(
      { queue: new PostgresOutboxQueue(sql), publisher: picky, clock },
      10,
    );
    expect(report).toMatchObject({ claimed: 4, published: 2, failed: 2 });
    const rows = await sql`SELECT id, status FROM outbox_event ORDER BY id`;
    expect(rows.map((r) => r.status)).toEqual(['PUBLISHED', 'FAILED', 'PUBLISHED', 'FAILED']);
  });
});

describe('the outbox loop in a running server', () => {
  let h: Harness;
  const bus = new InProcessBus();
  const seen: DomainEvent[] = [];
  bus.subscribe((event) => {
    seen.push(event);
  });

  beforeAll(async () => {
    h = await startHarness({ runLoops: true, publisher: bus });
  });
  afterAll(() => h.close());

  it('publishes a created task to the bus right after the commit', async () => {
    const app = await h.createApplication();
    await h.request('POST', '/v1/workflow-definitions', { token: app.apiKey, body: zipWorkflow() });
    const created = await h.request('POST', '/v1/tasks', {
      token: app.apiKey,
      headers: { 'idempotency-key': 'loop-1' },
      body: {
        workflowName: 'zip-clean-watermark',
        workflowVersion: '1',
        name: 'n',
        input: { sourceZip: 'z' },
      },
    });
    await expect.poll(() => seen.map((e) => e.type), { timeout: 5_000 }).toContain('TASK_CREATED');
    const event = seen.find((e) => e.payload.taskId === created.body.task.id)!;
    expect(event).toMatchObject({ tenantId: app.tenantId, applicationId: app.applicationId });
    expect(event.payload).toMatchObject({ executionId: created.body.execution.id, taskVersion: '1' });
    const metrics = await fetch(`${h.url}/metrics`).then((r) => r.text());
    expect(metrics).toMatch(/tdp_outbox_published_total [1-9]/);
    expect(metrics).toMatch(/tdp_outbox_oldest_unpublished_age_seconds 0/);
  });
});

describe('a server without an event bus', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ runLoops: true, withoutEventBus: true });
  });
  afterAll(() => h.close());

  it('records every fact in the task event log and writes no domain outbox rows nobody would take', async () => {
    const app = await h.createApplication();
    await h.request('POST', '/v1/workflow-definitions', { token: app.apiKey, body: zipWorkflow() });
    const created = await h.request('POST', '/v1/tasks', {
      token: app.apiKey,
      headers: { 'idempotency-key': 'no-bus-1' },
      body: {
        workflowName: 'zip-clean-watermark',
        workflowVersion: '1',
        name: 'n',
        input: { sourceZip: 'z' },
      },
    });
    expect(created.status).toBe(201);
    await h.request('POST', `/v1/tasks/${created.body.task.id}:cancel`, { token: app.apiKey, body: {} });
    const db = connectDatabase({ url: h.databaseUrl, maxConnections: 1 });
    try {
      const [counts] = await db`
        SELECT (SELECT count(*)::int FROM task_event WHERE task_id = ${created.body.task.id}) AS events,
               (SELECT count(*)::int FROM outbox_event) AS outbox`;
      expect(counts!.events).toBeGreaterThanOrEqual(2);
      expect(counts!.outbox).toBe(0);
    } finally {
      await db.end();
    }
  });
});

describe('a dispatcher in another process', () => {
  it('is woken by NOTIFY when a task is created elsewhere, long before its idle timeout', async () => {
    const writer = await startHarness({ runLoops: false });
    const bus = new InProcessBus();
    const seen: string[] = [];
    bus.subscribe((event) => {
      seen.push(event.id);
    });
    const dispatcher = await startHarness({
      runLoops: true,
      publisher: bus,
      sharedDatabaseUrl: writer.databaseUrl,
    });
    try {
      const app = await writer.createApplication();
      await writer.request('POST', '/v1/workflow-definitions', { token: app.apiKey, body: zipWorkflow() });
      // Let the dispatcher find nothing and go to sleep (its idle timeout is 30 s).
      await new Promise((r) => setTimeout(r, 300));
      const started = Date.now();
      await writer.request('POST', '/v1/tasks', {
        token: app.apiKey,
        headers: { 'idempotency-key': 'notify-1' },
        body: {
          workflowName: 'zip-clean-watermark',
          workflowVersion: '1',
          name: 'n',
          input: { sourceZip: 'z' },
        },
      });
      await expect.poll(() => seen.length, { timeout: 5_000, interval: 20 }).toBe(1);
      expect(Date.now() - started).toBeLessThan(5_000);
    } finally {
      await dispatcher.close();
      await writer.close();
    }
  });
});

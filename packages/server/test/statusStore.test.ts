/**
 * The status store's transactions against PostgreSQL: a transaction's writes go out as one statement
 * (with COMMIT behind it, or on its own for a write-only one), so a failing write must still take the
 * whole transaction with it and be reported. Write-only transactions that arrive together share one
 * statement (group commit) without sharing a failure.
 */
import { newId } from '@tdp/protocol';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Harness, startHarness } from '../../../test/harness.ts';
import { TcpProxy } from '../../../test/tcpProxy.ts';
import { PostgresFactStore } from '../src/adapters/outbound/postgres/factStore.ts';
import type { FactWriteSet } from '../src/core/facts/writeSet.ts';
import { connectDatabase } from '../src/main.ts';

let h: Harness;
let sql: ReturnType<typeof connectDatabase>;
let store: PostgresFactStore;

beforeAll(async () => {
  h = await startHarness();
  sql = connectDatabase({ url: h.databaseUrl, maxConnections: 4 });
  store = new PostgresFactStore(sql);
});
afterAll(async () => {
  await sql.end();
  await h.close();
});

/** An idempotency claim plus an outbox row (a table without foreign keys), written together. */
const claimWithOutbox = (key: string, outboxId: string): FactWriteSet => ({
  idempotency: {
    principal: 'test',
    operation: 'store-test',
    key,
    requestHash: 'h',
    responseStatus: 201,
    responseBody: { ok: true },
    createdAt: new Date(),
  },
  events: [],
  outbox: [
    {
      id: outboxId,
      tenantId: newId(),
      applicationId: newId(),
      aggregateId: newId(),
      eventType: 'test.written',
      payload: { key },
      createdAt: new Date(),
    },
  ],
  realtime: [],
});

const outboxRows = async (id: string) =>
  (await sql`SELECT count(*)::int AS n FROM outbox_event WHERE id = ${id}`)[0]!.n as number;

describe('status store transactions', () => {
  for (const writeOnly of [true, false]) {
    const kind = writeOnly ? 'a write-only transaction' : 'a transaction that read first';
    it(`${kind} commits all its writes, or none when one of them fails`, async () => {
      const key = newId();
      const first = newId();
      await store.transaction(
        async (tx) => {
          if (!writeOnly) await tx.findDedup(newId());
          tx.writeAtCommit([claimWithOutbox(key, first)]);
        },
        { writeOnly },
      );
      expect(await outboxRows(first)).toBe(1);

      // The same key again: the idempotency insert fails (a KeyTakenError to the core, the driver's unique
      // violation inside), so the outbox row beside it must not land.
      const second = newId();
      await expect(
        store.transaction(
          async (tx) => {
            if (!writeOnly) await tx.findDedup(newId());
            tx.writeAtCommit([claimWithOutbox(key, second)]);
          },
          { writeOnly },
        ),
      ).rejects.toMatchObject({ name: 'KeyTakenError', cause: { code: '23505' } });
      expect(await outboxRows(second)).toBe(0);
    });
  }

  it('a transaction whose connection is cut fails, and the one connection of the pool is not handed back dead', async () => {
    const target = new URL(h.databaseUrl);
    const proxy = new TcpProxy(target.hostname, Number(target.port || 5432));
    await proxy.start();
    const url = new URL(h.databaseUrl);
    url.port = String(proxy.port);
    const single = connectDatabase({ url: url.toString(), maxConnections: 1 });
    const cutStore = new PostgresFactStore(single);
    try {
      let readOnce!: () => void;
      const read = new Promise<void>((resolve) => (readOnce = resolve));
      let proceed!: () => void;
      const cut = new Promise<void>((resolve) => (proceed = resolve));
      const broken = cutStore.transaction(async (tx) => {
        await tx.findDedup(newId());
        readOnce();
        await cut;
        return tx.findDedup(newId());
      });
      broken.catch(() => {});
      await read;
      await proxy.cut();
      proceed();
      await expect(broken).rejects.toThrow();
      await proxy.restore();
      // The same pool's next transactions connect again instead of using the cut connection.
      for (let i = 0; i < 3; i += 1) {
        await expect(cutStore.transaction(async (tx) => tx.findDedup(newId()))).resolves.toBeNull();
      }
    } finally {
      await single.end({ timeout: 1 });
      await proxy.cut();
    }
  });

  const writeOnly = (key: string, outboxId: string) =>
    store.transaction(async (tx) => tx.writeAtCommit([claimWithOutbox(key, outboxId)]), {
      writeOnly: true,
    });

  it('write-only transactions that arrive together commit as one statement', async () => {
    const keys = Array.from({ length: 12 }, () => newId());
    await Promise.all(keys.map((key) => writeOnly(key, newId())));
    // Rows committed by one statement share its transaction id: fewer transactions than writes.
    const [row] = await sql<{ n: number }[]>`
      SELECT count(DISTINCT xmin::text)::int AS n FROM idempotency WHERE key = ANY(${keys})`;
    expect(row!.n).toBeLessThan(keys.length);
  });

  it('a member of a group whose key is taken fails alone, as it would have, and the others commit', async () => {
    const taken = newId();
    await writeOnly(taken, newId());
    const keys = Array.from({ length: 12 }, () => newId());
    const outboxIds = keys.map(() => newId());
    const late = newId();
    const outcomes = await Promise.allSettled([
      ...keys.map((key, i) => writeOnly(key, outboxIds[i]!)),
      writeOnly(taken, late),
    ]);
    expect(outcomes.slice(0, keys.length).every((o) => o.status === 'fulfilled')).toBe(true);
    expect(outcomes.at(-1)).toMatchObject({
      status: 'rejected',
      reason: { name: 'KeyTakenError', cause: { code: '23505' } },
    });
    expect(await outboxRows(late)).toBe(0);
    for (const id of outboxIds) expect(await outboxRows(id)).toBe(1);
  });

  it('a write-only transaction refuses to read', async () => {
    await expect(store.transaction(async (tx) => tx.findDedup(newId()), { writeOnly: true })).rejects.toThrow(
      /cannot read/,
    );
  });
});

describe('a status store transaction whose connection is lost', () => {
  let proxy: TcpProxy;
  let through: ReturnType<typeof connectDatabase>;
  let proxied: PostgresFactStore;
  beforeAll(async () => {
    const target = new URL(h.databaseUrl);
    proxy = new TcpProxy(target.hostname, Number(target.port || 5432));
    await proxy.start();
    const url = new URL(h.databaseUrl);
    url.port = String(proxy.port);
    through = connectDatabase({ url: url.toString(), maxConnections: 2 });
    proxied = new PostgresFactStore(through);
  });
  afterAll(async () => {
    await through.end({ timeout: 1 });
    await proxy.cut();
  });

  it('before its commit was sent runs again, whole, on another connection, and commits once', async () => {
    const outboxId = newId();
    let runs = 0;
    // The answer to the transaction's first round trip (BEGIN and its read) never arrives.
    const lost = proxy.cutReplyWhen('BEGIN');
    await proxied.transaction(async (tx) => {
      runs += 1;
      await tx.findDedup(newId());
      tx.writeAtCommit([claimWithOutbox(newId(), outboxId)]);
    });
    await lost;
    expect(runs).toBe(2);
    expect(await outboxRows(outboxId)).toBe(1);
  });

  for (const writeOnly of [false, true]) {
    it(`${writeOnly ? 'write-only, ' : ''}after its commit was sent fails and runs once: the outcome is unknown`, async () => {
      const outboxId = newId();
      let runs = 0;
      // PostgreSQL commits; its answer never arrives (a write-only one's is its statement's, `SELECT 1`).
      const lost = proxy.cutReplyWhen(writeOnly ? 'SELECT 1' : 'COMMIT');
      const failed = proxied.transaction(
        async (tx) => {
          runs += 1;
          if (!writeOnly) await tx.findDedup(newId());
          tx.writeAtCommit([claimWithOutbox(newId(), outboxId)]);
        },
        { writeOnly },
      );
      await expect(failed).rejects.toMatchObject({
        code: expect.stringMatching(/^(CONNECTION_CLOSED|ECONNRESET)$/),
      });
      await lost;
      expect(runs).toBe(1);
      expect(await outboxRows(outboxId)).toBe(1);
    });
  }
});

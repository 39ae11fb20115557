/**
 * The PostgreSQL driver's closed connections, as patched (patches/postgres+3.4.9.patch): bytes written
 * just before a close, statements sent on a reserved connection after it, and statements sent between a
 * socket's error and its close neither end the process nor wedge the connection when it opens again; the
 * error that ended a connection does not fail the first statement of the next one; a LISTEN is made again after its connection was lost,
 * and the caller told (to catch up on what it missed). Real PostgreSQL; the driver as TDP's pools use
 * it (a socket of our own, corked writes).
 */
import { connect as connectTcp, type Socket } from 'node:net';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase } from '../../../test/database.ts';
import { TcpProxy } from '../../../test/tcpProxy.ts';
import { connectDatabase, type Sql, transaction } from '../src/adapters/outbound/postgres/database.ts';

let database: Awaited<ReturnType<typeof createTestDatabase>>;
beforeAll(async () => {
  database = await createTestDatabase();
});
afterAll(async () => {
  await database?.drop();
});

/** A one-connection pool whose current socket the test can reach; `closes` counts connection closes. */
function pool() {
  const target = new URL(database.url);
  const state = { socket: null as Socket | null, closes: 0 };
  let closed: () => void = () => {};
  const sql = postgres(database.url, {
    max: 1,
    fetch_types: false,
    connect_timeout: 2,
    onnotice: () => {},
    onclose: () => {
      state.closes += 1;
      closed();
    },
    socket: () => {
      state.socket = connectTcp({ host: target.hostname, port: Number(target.port) });
      return state.socket;
    },
    // The driver's types leave out its `socket` option (TDP's pools use it: database.ts).
  } as postgres.Options<Record<string, never>>);
  const nextClose = () =>
    new Promise<void>((resolve) => {
      closed = resolve;
    });
  return { sql, state, nextClose };
}

/** A statement's answer, or a failure naming it once the pool has kept it waiting for 5 s (a wedge). */
async function answered<T>(statement: PromiseLike<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const wedged = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error('no answer within 5 s: the pool is wedged')), 5_000);
  });
  try {
    return await Promise.race([statement, wedged]);
  } finally {
    clearTimeout(timer);
  }
}

describe('the driver after a connection closes', () => {
  it('drops a write deferred to its flush when the socket closes first; the connection opens again', async () => {
    const { sql, state } = pool();
    try {
      await sql`SELECT 1`;
      // A short statement is flushed by an immediate the driver sets when it writes (a microtask after
      // execute()). This immediate, set first, runs just before it and closes the socket, as when a
      // close handled earlier in the same turn of the event loop had led to this statement.
      const pending = sql`SELECT 2 AS n`.execute();
      const socket = state.socket!;
      await new Promise<void>((resolve) =>
        setImmediate(() => {
          socket.destroy();
          socket.emit('close', false);
          resolve();
        }),
      );
      await expect(pending).rejects.toMatchObject({ code: 'CONNECTION_CLOSED' });
      // Unpatched, the stale flush timer held back the reopened connection's start-up message (and the
      // dropped statement's bytes would have gone out ahead of it): CONNECT_TIMEOUT, every time.
      expect(await sql`SELECT 3 AS n`).toEqual([{ n: 3 }]);
      expect(await sql`SELECT 4 AS n`).toEqual([{ n: 4 }]);
    } finally {
      await sql.end({ timeout: 1 });
    }
  });

  it('refuses a statement on a reserved connection that has closed, instead of throwing from a timer', async () => {
    const { sql, nextClose } = pool();
    const admin = postgres(database.url, { max: 1, fetch_types: false, onnotice: () => {} });
    try {
      const reserved = await sql.reserve();
      const [row] = await reserved<{ pid: number }[]>`SELECT pg_backend_pid() AS pid`;
      const closing = nextClose();
      await admin`SELECT pg_terminate_backend(${row!.pid})`;
      await closing;
      // Unpatched: the statement's bytes were handed to the dropped socket at the next tick, a
      // TypeError no one could catch, and the statement never settled.
      await expect(reserved`SELECT 1`).rejects.toMatchObject({ code: 'CONNECTION_CLOSED' });
      expect(await sql`SELECT 5 AS n`).toEqual([{ n: 5 }]);
    } finally {
      await Promise.all([sql.end({ timeout: 1 }), admin.end({ timeout: 1 })]);
    }
  });

  it('never runs a closed reservation’s statement on the connection reopened for the pool', async () => {
    const { sql, nextClose } = pool();
    const admin = postgres(database.url, { max: 1, fetch_types: false, onnotice: () => {} });
    try {
      const reserved = await sql.reserve();
      const [first] = await reserved<{ pid: number }[]>`SELECT pg_backend_pid() AS pid`;
      const closing = nextClose();
      await admin`SELECT pg_terminate_backend(${first!.pid})`;
      await closing;
      // The pool's one connection opens again for someone else's statement.
      const [reopened] = await sql<{ pid: number }[]>`SELECT pg_backend_pid() AS pid`;
      expect(reopened!.pid).not.toBe(first!.pid);
      // Unpatched, this ran on that connection, outside the reservation its caller thought it had.
      await expect(reserved`SELECT pg_backend_pid() AS pid`).rejects.toMatchObject({
        code: 'CONNECTION_CLOSED',
      });
    } finally {
      await Promise.all([sql.end({ timeout: 1 }), admin.end({ timeout: 1 })]);
    }
  });

  it('fails the statement in flight when its backend is terminated, and not the next connection’s first one', async () => {
    const { sql, nextClose } = pool();
    const admin = postgres(database.url, { max: 1, fetch_types: false, onnotice: () => {} });
    try {
      const [row] = await sql<{ pid: number }[]>`SELECT pg_backend_pid() AS pid`;
      const closing = nextClose();
      const sleeping = sql`SELECT pg_sleep(5)`.execute();
      await admin`SELECT pg_terminate_backend(${row!.pid})`;
      await expect(sleeping).rejects.toMatchObject({ code: 'CONNECTION_CLOSED' });
      await closing;
      // Unpatched, the terminated backend's FATAL error stayed with the connection and failed the first
      // statement of the one opened after it (57P01, "terminating connection due to administrator command").
      expect(await answered(sql`SELECT 8 AS n`)).toEqual([{ n: 8 }]);
    } finally {
      await Promise.all([sql.end({ timeout: 1 }), admin.end({ timeout: 1 })]);
    }
  });

  it('fails a statement sent between a socket’s error and its close; the connection opens again and keeps answering', async () => {
    const { sql, state } = pool();
    try {
      await sql`SELECT 1`;
      // A reset socket reports its error first and its close a turn later. Between the two,
      // transaction() saw its statement fail and sent ROLLBACK on the same connection.
      const failed = transaction(sql as unknown as Sql, async (tx) => {
        const sleeping = tx`SELECT pg_sleep(5)`.execute();
        setTimeout(
          () => state.socket?.destroy(Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' })),
          50,
        );
        await sleeping;
      });
      await expect(failed).rejects.toMatchObject({ code: 'ECONNRESET' });
      // Unpatched, that ROLLBACK stayed queued on the connection: the reopened one took it for the
      // statement it was waiting on, and never answered anything again (the pool wedged for good).
      expect(await answered(sql`SELECT 6 AS n`)).toEqual([{ n: 6 }]);
      expect(await answered(sql`SELECT 7 AS n`)).toEqual([{ n: 7 }]);
    } finally {
      await sql.end({ timeout: 1 });
    }
  });

  it('LISTENs again, and says so, when its connection closed while the database refused new ones', async () => {
    const target = new URL(database.url);
    const proxy = new TcpProxy(target.hostname, Number(target.port));
    await proxy.start();
    const through = new URL(database.url);
    through.port = String(proxy.port);
    const sql = connectDatabase({ url: through.toString(), maxConnections: 2 });
    const notifier = connectDatabase({ url: database.url, maxConnections: 1 });
    try {
      const heard: string[] = [];
      let listened = 0;
      await sql.listen(
        'tdp_test_relisten',
        (payload) => heard.push(payload),
        () => {
          listened += 1;
        },
      );
      expect(listened).toBe(1);
      // The LISTEN connection is dropped and the next ones refused for a while (a failover, a restart).
      await proxy.cut();
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      await proxy.restore();
      await expect
        .poll(
          async () => {
            await notifier`SELECT pg_notify('tdp_test_relisten', 'again')`;
            return heard;
          },
          { timeout: 10_000, interval: 250 },
        )
        .toContain('again');
      expect(listened).toBe(2); // told once it held again (the caller catches up there)
    } finally {
      await Promise.all([sql.end({ timeout: 1 }), notifier.end({ timeout: 1 })]);
      await proxy.cut();
    }
  });
});

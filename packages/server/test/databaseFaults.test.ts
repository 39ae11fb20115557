/**
 * A server never dies of, or hangs on, a database fault: connections terminated by an administrator
 * (while the driver starts them up, and inside a transaction), a COMMIT that never answers, and a loop
 * stuck on a lock. Real PostgreSQL, a real `tdp server` process where the fault would be a crash.
 */
import { spawn } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createTestDatabase } from '../../../test/database.ts';
import { type Harness, startHarness } from '../../../test/harness.ts';
import { TcpProxy } from '../../../test/tcpProxy.ts';
import { type TdpProcess, tdpProcess } from '../../../test/tdpProcess.ts';
import { freePort } from '../../cli/src/embeddedPostgres.ts';
import { connectDatabase, type Sql } from '../src/adapters/outbound/postgres/database.ts';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A proxy in front of the test database, and the database URL through it. */
async function proxied(url: string): Promise<{ proxy: TcpProxy; url: string }> {
  const target = new URL(url);
  const proxy = new TcpProxy(target.hostname, Number(target.port || 5432));
  await proxy.start();
  const through = new URL(url);
  through.port = String(proxy.port);
  return { proxy, url: through.toString() };
}

/** Terminates the server's backends (those `where` picks); how many. */
async function terminate(admin: Sql, where = 'true'): Promise<number> {
  const rows = await admin.unsafe(
    `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
     WHERE application_name = 'tdp-server' AND datname = current_database() AND (${where})`,
  );
  return rows.length;
}

/** The process still answers (a crashed one refuses the connection). */
const alive = (tdp: TdpProcess) =>
  fetch(`${tdp.url}/healthz`).then(
    (response) => response.ok,
    () => false,
  );

async function createApplication(tdp: TdpProcess, name: string): Promise<number> {
  const admin = { authorization: `Bearer ${tdp.adminToken}`, 'content-type': 'application/json' };
  const tenant = await fetch(`${tdp.url}/admin/v1/tenants`, {
    method: 'POST',
    headers: admin,
    body: JSON.stringify({ name: `tenant-${name}` }),
  });
  if (tenant.status !== 201) return tenant.status;
  const { id } = (await tenant.json()) as { id: string };
  const created = await fetch(`${tdp.url}/admin/v1/tenants/${id}/applications`, {
    method: 'POST',
    headers: admin,
    body: JSON.stringify({ name }),
  });
  return created.status;
}

describe('database faults, on a real tdp server process', () => {
  let database: { url: string; drop(): Promise<void> };
  let admin: Sql;
  let proxy: TcpProxy;
  let tdp: TdpProcess;
  beforeAll(async () => {
    database = await createTestDatabase();
    admin = connectDatabase({ url: database.url, maxConnections: 2 });
    const through = await proxied(database.url);
    proxy = through.proxy;
    tdp = tdpProcess({ databaseUrl: through.url, port: await freePort() });
    await tdp.start();
  }, 90_000);
  afterAll(async () => {
    await tdp.kill();
    await proxy.cut();
    await admin.end();
    await database.drop();
  });

  it('a connection terminated while the driver starts it up does not kill the server', async () => {
    // The driver's start-up type query, if it sends one, never reaches PostgreSQL: the backend it was
    // for is terminated first, so the query fails with 57P01 (its promise was dropped: a crash).
    const typeQuery = proxy.holdWhen('pg_catalog.pg_type');
    await terminate(admin);
    // New connections open for the next requests.
    const first = createApplication(tdp, 'after-terminate');
    const held = await Promise.race([typeQuery, sleep(3_000)]);
    if (held) await terminate(admin);
    expect([201, 503]).toContain(await first);
    await sleep(1_000);
    expect(await alive(tdp)).toBe(true);
    for (let i = 0; i < 3; i += 1) expect(await createApplication(tdp, `next-${i}`)).toBe(201);
  }, 60_000);

  it('a connection terminated inside a transaction fails that request only; the next transactions work', async () => {
    // The application insert waits on this lock inside its transaction; reads pass.
    const lock = admin.reserve();
    const locker = await lock;
    await locker`BEGIN`;
    await locker`LOCK TABLE application IN SHARE MODE`;
    const blocked = createApplication(tdp, 'inside-transaction');
    await expect
      .poll(async () => (await terminate(admin, `wait_event_type = 'Lock'`)) > 0, { timeout: 10_000 })
      .toBe(true);
    await locker`ROLLBACK`;
    locker.release();
    expect([201, 503]).toContain(await blocked);
    await sleep(500);
    expect(await alive(tdp)).toBe(true);
    for (let i = 0; i < 3; i += 1) expect(await createApplication(tdp, `then-${i}`)).toBe(201);
  }, 60_000);
});

describe('a database that stops answering', () => {
  let h: Harness;
  let proxy: TcpProxy;
  beforeAll(async () => {
    // Every test database lives on the one PostgreSQL server: the proxy fronts it.
    const server = new URL(inject('databaseAdminUrl'));
    proxy = new TcpProxy(server.hostname, Number(server.port || 5432));
    await proxy.start();
    h = await startHarness({
      serverDatabaseUrl: (url) => {
        const through = new URL(url);
        through.port = String(proxy.port);
        return through.toString();
      },
      settings: { databaseAnswerDeadlineMs: 1_500, readinessDatabaseDeadlineMs: 300 },
    });
  }, 60_000);
  afterAll(async () => {
    await h.close();
    await proxy.cut();
  });

  it('a COMMIT that never answers: the deadline destroys the connection, /readyz is not ready, then ready again', async () => {
    expect((await fetch(`${h.url}/readyz`)).status).toBe(200);
    const commit = proxy.holdWhen('COMMIT');
    // Creating an application is one transaction: its COMMIT is held at the proxy, unanswered.
    const creating = h.createApplication().then(
      () => 201,
      (error: Error) => error.message,
    );
    const held = await commit;
    // The whole network stops passing bytes: the pool's idle connections, and new ones.
    proxy.freeze({ newConnections: true });
    const notReady = await fetch(`${h.url}/readyz`);
    expect(notReady.status).toBe(503);
    expect(notReady.headers.get('content-type')).toContain('application/problem+json');
    expect(await notReady.json()).toMatchObject({
      code: 'NOT_READY',
      checks: { database: expect.any(String) },
    });
    // The server gives the connection up at its deadline; nothing is handed back to the pool half-done.
    await held.clientClosed;
    expect(await creating).toMatch(/503/);
    // The network is back for new connections: readiness and transactions come back by themselves.
    proxy.thaw();
    await expect
      .poll(async () => (await fetch(`${h.url}/readyz`)).status, { timeout: 20_000, interval: 200 })
      .toBe(200);
    await expect(h.createApplication()).resolves.toMatchObject({ apiKey: expect.any(String) });
  }, 60_000);
});

describe('a stuck loop', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ runLoops: true, settings: { loopRoundDeadlineMs: 300 } });
  });
  afterAll(() => h.close());

  it('makes /readyz answer 503 naming it, and ready again once it moves', async () => {
    await expect.poll(async () => (await fetch(`${h.url}/readyz`)).status, { timeout: 10_000 }).toBe(200);
    const admin = connectDatabase({ url: h.databaseUrl, maxConnections: 1 });
    const locker = await admin.reserve();
    try {
      // The scheduler's next round waits on this lock (up to the statement timeout, 10 s).
      await locker`BEGIN`;
      await locker`LOCK TABLE scheduling_request IN ACCESS EXCLUSIVE MODE`;
      // Polled until the scheduler is the loop named: another loop's slow round (300 ms here, on a loaded
      // machine) may make a 503 of its own first, and be ready again by the next read.
      const readiness = async () => {
        const response = await fetch(`${h.url}/readyz`);
        const body = (await response.json()) as { code?: string; checks?: Record<string, string> };
        return { status: response.status, body };
      };
      await expect
        .poll(async () => (await readiness()).body.checks?.loops ?? '', { timeout: 5_000, interval: 100 })
        .toMatch(/stuck: .*scheduler/);
      const { status, body } = await readiness();
      expect(status).toBe(503);
      expect(body.code).toBe('NOT_READY');
      expect(body.checks?.loops).toMatch(/stuck: .*scheduler/);
      expect(body.checks?.database).toBe('ok');
    } finally {
      await locker`ROLLBACK`;
      locker.release();
      await admin.end();
    }
    await expect.poll(async () => (await fetch(`${h.url}/readyz`)).status, { timeout: 10_000 }).toBe(200);
  }, 30_000);
});

describe('the process guard', () => {
  const guard = new URL('../src/host/processGuard.ts', import.meta.url).pathname;
  /** Runs `body` in a node process with the guard installed: its exit code and what it logged. */
  const run = (body: string) =>
    new Promise<{ code: number | null; output: string }>((resolve) => {
      const child = spawn(
        process.execPath,
        [
          '--conditions=@tdp/source',
          '--import',
          'tsx',
          '--input-type=module',
          '-e',
          `import { guardProcess } from '${guard}';
           guardProcess({ onFault: (kind) => console.log('FAULT', kind) });
           ${body}
           setTimeout(() => process.exit(0), 300);`,
        ],
        { stdio: ['ignore', 'pipe', 'pipe'] },
      );
      let output = '';
      child.stdout.on('data', (chunk) => {
        output += chunk;
      });
      child.stderr.on('data', (chunk) => {
        output += chunk;
      });
      child.on('exit', (code) => resolve({ code, output }));
    });

  it('logs an unhandled rejection and marks a fault, without exiting', async () => {
    const { code, output } = await run(`Promise.reject(new Error('nobody handled me'));`);
    expect(code).toBe(0);
    expect(output).toContain('FAULT unhandled rejection');
    expect(output).toContain('nobody handled me');
  });

  it('survives an exception of a lost database connection, and exits with 1 on any other', async () => {
    const lost = await run(
      `setTimeout(() => { throw Object.assign(new Error('terminating connection'), { code: '57P01' }); });`,
    );
    expect(lost.code).toBe(0);
    expect(lost.output).toContain('FAULT uncaught exception');
    const bug = await run(`setTimeout(() => { throw new TypeError('a bug'); });`);
    expect(bug.code).toBe(1);
    expect(bug.output).toContain('a bug');
  });
});

describe("array types, without the driver's start-up type query", () => {
  it('binds and reads text, uuid, bigint and jsonb arrays as they were', async () => {
    const database = await createTestDatabase();
    const sql = connectDatabase({ url: database.url, maxConnections: 1 });
    try {
      const texts = ['plain', 'with "quotes"', 'back\\slash', 'NULL', '', 'comma, brace }', null];
      const ids = ['7c9e6679-7425-40de-944b-e07fc1f90ae7'];
      const documents = [{ a: 1, b: ['x', 'y "z"'] }, null];
      const [row] = await sql<Record<string, unknown[]>[]>`
        SELECT ${texts}::text[] AS texts, ${ids}::uuid[] AS ids, ${['1', '9007199254740993']}::bigint[] AS numbers,
               ${documents as never}::jsonb[] AS documents, ARRAY(SELECT to_jsonb(x) FROM (VALUES (1, 'one')) x) AS rows`;
      expect(row).toEqual({
        texts,
        ids,
        numbers: [1n, 9007199254740993n],
        documents,
        rows: [{ column1: 1, column2: 'one' }],
      });
    } finally {
      await sql.end();
      await database.drop();
    }
  });
});

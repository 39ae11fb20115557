import { readFile } from 'node:fs/promises';
import { errorCatalogue } from '@tdp/protocol';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { type Harness, startHarness, zipWorkflow } from '../../../test/harness.ts';
import { coordinator } from '../../../test/statusFixture.ts';
import { TcpProxy } from '../../../test/tcpProxy.ts';
import { connectDatabase } from '../src/main.ts';

describe('a database outage', () => {
  let h: Harness;
  let proxy: TcpProxy;
  let sql: ReturnType<typeof connectDatabase>;

  beforeAll(async () => {
    const target = new URL(inject('databaseAdminUrl'));
    proxy = new TcpProxy(target.hostname, Number(target.port || 5432));
    await proxy.start();
    // The server reaches the same PostgreSQL through the proxy; the test reads it directly.
    h = await startHarness({
      serverDatabaseUrl: (url) => {
        const through = new URL(url);
        through.hostname = '127.0.0.1';
        through.port = String(proxy.port);
        return through.toString();
      },
    });
    sql = connectDatabase({ url: h.databaseUrl, maxConnections: 1 });
  });
  afterAll(async () => {
    await sql.end();
    await proxy.restore();
    await h.close();
    await proxy.cut();
  });

  it('answers 503 DATABASE_UNAVAILABLE, writes nothing, and recovers when the database is back', async () => {
    const app = await h.createApplication();
    await h.request('POST', '/v1/workflow-definitions', { token: app.apiKey, body: zipWorkflow() });
    const body = {
      workflowName: 'zip-clean-watermark',
      workflowVersion: '1',
      name: 'n',
      input: { sourceZip: 'z' },
    };
    expect(
      (
        await h.request('POST', '/v1/tasks', {
          token: app.apiKey,
          headers: { 'idempotency-key': 'before' },
          body,
        })
      ).status,
    ).toBe(201);

    await proxy.cut();
    const during = await h.request('POST', '/v1/tasks', {
      token: app.apiKey,
      headers: { 'idempotency-key': 'during' },
      body,
    });
    expect(during.status).toBe(503);
    expect(during.body).toMatchObject({ code: 'DATABASE_UNAVAILABLE', retryable: true });
    expect(during.headers.get('retry-after')).toBe('1');
    expect((await fetch(`${h.url}/readyz`)).status).toBe(503);
    const [count] = await sql`SELECT count(*) AS n FROM idempotency WHERE key = 'during'`;
    expect(count!.n).toBe(0n);

    await proxy.restore();
    await expect
      .poll(
        async () =>
          (
            await h.request('POST', '/v1/tasks', {
              token: app.apiKey,
              headers: { 'idempotency-key': 'during' },
              body,
            })
          ).status,
        {
          timeout: 10_000,
        },
      )
      .toBe(201);
    expect((await fetch(`${h.url}/readyz`)).status).toBe(200);
  });

  it('requests waiting for a connection when the connections drop are answered, and the pool recovers', async () => {
    const c = await coordinator(h);
    const { ctx } = await c.runningContext();
    expect((await c.report(ctx, c.event(ctx))).status).toBe(200);
    let seq = 2;
    const progress = () =>
      c.report(ctx, c.event(ctx, { sourceSeq: seq++, eventType: 'STEP_PROGRESS', progress: { percent: 1 } }));
    // More reports than pooled connections: some are in transactions, the rest queue for a connection.
    const inFlight = Array.from({ length: 30 }, () => progress());
    await new Promise((resolve) => setTimeout(resolve, 5));
    await proxy.cut();
    // Each is answered (reconnecting fails while the database is away) instead of waiting for good.
    const during = await Promise.all(inFlight);
    expect(during.filter((r) => r.status !== 200).map((r) => r.body.code)).toEqual(
      during.filter((r) => r.status !== 200).map(() => 'DATABASE_UNAVAILABLE'),
    );
    await proxy.restore();
    await expect.poll(async () => (await progress()).status, { timeout: 10_000 }).toBe(200);
    // Concurrent again, so that every connection of the pool serves one: a broken one would fail it.
    const after = await Promise.all(Array.from({ length: 30 }, () => progress()));
    const failures = after.filter((r) => r.status !== 200 && r.body.code !== 'SOURCE_SEQ_REGRESSION');
    expect(failures.map((r) => r.body.code)).toEqual([]);
  });
});

describe('the request deadline', () => {
  let h: Harness;
  let sql: ReturnType<typeof connectDatabase>;
  beforeAll(async () => {
    h = await startHarness({ requestDeadlineMs: 1_000 });
    sql = connectDatabase({ url: h.databaseUrl, maxConnections: 1 });
  });
  afterAll(async () => {
    await sql.end();
    await h.close();
  });

  it('answers a POST still waiting at its deadline 503 REQUEST_TIMEOUT; a retry gets the real answer', async () => {
    const c = await coordinator(h);
    const { ctx } = await c.runningContext();
    const event = c.event(ctx);
    // The task row is held by another transaction, so the report waits on its lock past the deadline.
    let release!: () => void;
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    let locked!: () => void;
    const isLocked = new Promise<void>((resolve) => {
      locked = resolve;
    });
    const holder = sql.begin(async (tx) => {
      await tx`SELECT id FROM task WHERE id = ${ctx.taskId} FOR UPDATE`;
      locked();
      await held;
    });
    await isLocked;
    const started = Date.now();
    const late = await c.report(ctx, event);
    const waited = Date.now() - started;
    release();
    await holder;
    expect(late.status).toBe(503);
    expect(late.body).toMatchObject({ code: 'REQUEST_TIMEOUT', retryable: true });
    expect(waited).toBeLessThan(5_000);
    // The report committed once the lock was free; the same event again is answered as it was.
    const retry = await c.report(ctx, event);
    expect(retry.status).toBe(200);
    expect(retry.body.eventId).toBe(event.eventId);
  });
});

describe('operations endpoints', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness();
  });
  afterAll(() => h.close());

  it('reports liveness, readiness with migrations, and Prometheus metrics', async () => {
    expect((await (await fetch(`${h.url}/healthz`)).json()) as unknown).toEqual({ status: 'ok' });
    const ready = await fetch(`${h.url}/readyz`);
    expect(ready.status).toBe(200);
    expect((await ready.json()) as unknown).toEqual({
      status: 'ready',
      checks: { database: 'ok', migrations: 'ok', loops: 'ok', process: 'ok' },
    });

    const sql = connectDatabase({ url: h.databaseUrl, maxConnections: 1 });
    await sql`DELETE FROM schema_migration WHERE version = (SELECT max(version) FROM schema_migration)`;
    const pending = await fetch(`${h.url}/readyz`);
    expect(pending.status).toBe(503);
    expect(((await pending.json()) as any).checks.migrations).toBe('pending migrations');
    await sql.end();

    await fetch(`${h.url}/healthz`);
    const metrics = await (await fetch(`${h.url}/metrics`)).text();
    expect(metrics).toContain('tdp_http_request_duration_seconds_bucket');
    expect(metrics).toContain('route="/healthz"');
    expect(metrics).toContain('tdp_outbox_oldest_unpublished_age_seconds');
  });

  it('serves an OpenAPI 3.1 document that lists the API and the problem schema, and a docs page', async () => {
    const doc = (await (await fetch(`${h.url}/openapi.json`)).json()) as any;
    expect(doc.openapi).toBe('3.1.0');
    expect(Object.keys(doc.paths)).toEqual(
      expect.arrayContaining([
        '/v1/tasks',
        '/v1/tasks/{id}',
        '/v1/workflow-definitions',
        '/admin/v1/tenants',
      ]),
    );
    expect(
      doc.paths['/v1/tasks'].post.requestBody.content['application/json'].schema.properties,
    ).toHaveProperty('workflowName');
    expect(JSON.stringify(doc.components)).toContain('retryable');
    const docs = await fetch(`${h.url}/docs`, { redirect: 'follow' });
    expect(docs.status).toBe(200);
    expect(await docs.text()).toContain('swagger');
  });

  it('answers unknown routes with a problem', async () => {
    const res = await h.request('GET', '/v1/nothing');
    expect(res.status).toBe(404);
    expect(res.headers.get('content-type')).toContain('application/problem+json');
    expect(res.body.code).toBe('ROUTE_NOT_FOUND');
  });
});

describe('the error catalogue', () => {
  it('matches docs/errors.md, code for code', async () => {
    const doc = await readFile(new URL('../../../docs/errors.md', import.meta.url), 'utf8');
    const rows = [...doc.matchAll(/^\| `([A-Z_]+)` *\| (\d{3}) *\| (yes|no) *\|/gm)].map((m) => [
      m[1],
      Number(m[2]),
      m[3] === 'yes',
    ]);
    const catalogue = Object.entries(errorCatalogue).map(([code, entry]) => [
      code,
      entry.status,
      entry.retryable,
    ]);
    expect(rows).toEqual(catalogue);
  });
});

describe('shutdown', () => {
  it('finishes in-flight requests before closing: every create either commits with 201 or is refused whole', async () => {
    const h = await startHarness();
    const app = await h.createApplication();
    await h.request('POST', '/v1/workflow-definitions', { token: app.apiKey, body: zipWorkflow() });
    const sql = connectDatabase({ url: h.databaseUrl, maxConnections: 1 });
    try {
      const body = {
        workflowName: 'zip-clean-watermark',
        workflowVersion: '1',
        name: 'n',
        input: { sourceZip: 'z' },
      };
      const inFlight = Array.from({ length: 30 }, (_, i) =>
        h
          .request('POST', '/v1/tasks', {
            token: app.apiKey,
            headers: { 'idempotency-key': `shutdown-${i}` },
            body,
          })
          .catch(() => null),
      );
      // Close once the first create has committed: the other 29 are then in flight or still arriving.
      const deadline = Date.now() + 5_000;
      while (Date.now() < deadline) {
        const [row] = await sql`SELECT count(*) AS n FROM task`;
        if (Number(row!.n) > 0) break;
        await new Promise((r) => setTimeout(r, 1));
      }
      const closing = h.server.close();
      const answers = await Promise.all(inFlight);
      await closing;
      const created = answers.filter((a) => a?.status === 201).length;
      expect(created).toBeGreaterThan(0);
      for (const answer of answers)
        if (answer && answer.status !== 201) expect(answer.body.code).toBe('SHUTTING_DOWN');
      const [row] = await sql`SELECT count(*) AS n FROM task`;
      expect(Number(row!.n)).toBe(created);
    } finally {
      await sql.end();
      await h.close().catch(() => {});
    }
  });
});

describe('logs', () => {
  it('never contain API keys, callback secrets or resource-provider tokens', async () => {
    const lines: string[] = [];
    const { pino } = await import('pino');
    const logger = pino({ level: 'trace' }, { write: (line: string) => lines.push(line) });
    const h = await startHarness({ logger });
    try {
      const tenant = await h.request('POST', '/admin/v1/tenants', {
        token: h.adminToken,
        body: { name: 'logged' },
      });
      const created = await h.request('POST', `/admin/v1/tenants/${tenant.body.id}/applications`, {
        token: h.adminToken,
        body: {
          name: 'app',
          resourceProvider: { url: 'https://rp.example', bearerToken: 'rp-secret-token-value' },
        },
      });
      await h.request('GET', '/v1/tasks', { token: created.body.apiKey.key });
      await h.request('GET', '/v1/tasks', { token: 'tdp_wrong' });
      const text = lines.join('');
      expect(lines.length).toBeGreaterThan(0);
      for (const secret of [
        created.body.apiKey.key,
        created.body.callbackSecret,
        'rp-secret-token-value',
        h.adminToken,
      ]) {
        expect(text).not.toContain(secret);
      }
    } finally {
      await h.close();
    }
  });
});

/**
 * The realtime relay on real `realtime_outbox` rows: progress coalescing, a Centrifugo-compatible HTTP
 * API that fails for a while (retried with back-off) or refuses (DEAD at once), TDP's own gateway run
 * on its own behind that API, and the crash window between publishing and marking, whose duplicate the
 * client store ignores.
 */
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { bindTaskStore, TaskStore } from '@tdp/client';
import { Gateway } from '@tdp/gateway';
import { newId } from '@tdp/protocol';
import { Centrifuge } from 'centrifuge';
import { SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { type Harness, startHarness } from '../../../test/harness.ts';
import { insertRealtime, PostgresRealtimeOutbox } from '../src/adapters/outbound/postgres/realtimeOutbox.ts';
import { CentrifugoApiPublisher, gatewayPublisher } from '../src/adapters/outbound/realtime/publishers.ts';
import { realtimeClaimPolicy } from '../src/core/outbox/policy.ts';
import { relayRealtime, supersededProgress } from '../src/core/realtime/relay.ts';
import { connectDatabase } from '../src/main.ts';

const row = (id: string, channel: string, aggregateId: string, payload: Record<string, unknown>) => ({
  id,
  channel,
  aggregateId,
  payload,
});
const summary = (status: string, notice: unknown = null) => ({
  kind: 'task.summary',
  lifecycleStatus: status,
  businessStatus: 'X',
  health: 'HEALTHY',
  notice,
});
const detail = (eventType: string, status = 'RUNNING', notice: unknown = null) => ({
  kind: 'task.detail',
  state: { lifecycleStatus: status, businessStatus: 'X', health: 'HEALTHY' },
  triggerEvent: { eventType },
  notice,
});

describe('progress coalescing', () => {
  it('drops progress-only messages a newer one of the same task on the same channel supersedes, and nothing else', () => {
    const rows = [
      row('s1', 'user', 'A', summary('RUNNING')), // the first of A here: kept (what came before is unknown)
      row('s2', 'user', 'A', summary('RUNNING')), // progress only, superseded by s3: dropped
      row('d1', 'detail:A', 'A', detail('STEP_PROGRESS')), // dropped (d2 follows)
      row('d2', 'detail:A', 'A', detail('STEP_PROGRESS')), // dropped (d3 follows)
      row('s3', 'user', 'A', summary('RUNNING')), // dropped: s4 follows
      row('b1', 'user', 'B', summary('RUNNING')), // another task: kept
      row('d3', 'detail:A', 'A', detail('STEP_FAILED', 'RUNNING', { id: 'n1' })), // a notice: kept
      row('s4', 'user', 'A', summary('FAILED', { id: 'n2' })), // terminal: kept
      row('d4', 'detail:A', 'A', detail('STEP_PROGRESS')), // the newest of its channel: kept
      row('s5', 'other', 'A', summary('FAILED')), // another channel's only message: kept
    ];
    expect([...supersededProgress(rows)].sort()).toEqual(['d1', 'd2', 's2', 's3']);
  });
});

describe('the relay', () => {
  let h: Harness;
  let app: Awaited<ReturnType<Harness['createApplication']>>;
  let sql: ReturnType<typeof connectDatabase>;
  const servers: Server[] = [];

  beforeAll(async () => {
    h = await startHarness({ runLoops: false });
    app = await h.createApplication();
    await h.request('POST', '/v1/workflow-definitions', {
      token: app.apiKey,
      body: {
        name: 'relay',
        version: '1',
        steps: [{ key: 'only', capability: 'nobody.relay', capabilityVersion: '1' }],
      },
    });
    sql = connectDatabase({ url: h.databaseUrl, maxConnections: 2 });
  });
  afterAll(async () => {
    for (const server of servers) {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
    await sql.end();
    await h.close();
  });

  /** Publishes nothing that is waiting from earlier tests (each test starts with an empty outbox). */
  const drain = () => sql`UPDATE realtime_outbox SET status = 'PUBLISHED' WHERE status <> 'PUBLISHED'`;
  const createTask = async (ownerId: string) =>
    (
      await h.request('POST', '/v1/tasks', {
        token: app.apiKey,
        headers: { 'idempotency-key': newId() },
        body: { workflowName: 'relay', workflowVersion: '1', name: 'relayed', ownerId },
      })
    ).body.task.id as string;
  const statuses = async (taskId: string) =>
    (
      await sql`SELECT status, attempts FROM realtime_message WHERE aggregate_id = ${taskId} ORDER BY created_at, id`
    ).map((r) => `${r.status}:${r.attempts}`);

  /** A server API answering each request as `answer` says: a status and body, or its connection dropped or left hanging. */
  async function fakeApi(
    answer: (request: IncomingMessage, body: any) => { status: number; body?: unknown } | 'drop' | 'hang',
  ) {
    const received: any[] = [];
    const server = createServer((request, response) => {
      let text = '';
      request.on('data', (chunk) => {
        text += chunk;
      });
      request.on('end', () => {
        const body = JSON.parse(text);
        received.push({ headers: request.headers, url: request.url, body });
        const reply = answer(request, body);
        if (reply === 'drop') return void request.socket.destroy();
        if (reply === 'hang') return;
        response
          .writeHead(reply.status, { 'content-type': 'application/json' })
          .end(JSON.stringify(reply.body ?? {}));
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    servers.push(server);
    return { url: `http://127.0.0.1:${(server.address() as { port: number }).port}/api`, received };
  }

  it('retries a batch the API answered 503 with spread-out back-off, then publishes it in order', async () => {
    await drain();
    let failures = 2;
    const api = await fakeApi((_request, body) =>
      failures-- > 0
        ? { status: 503 }
        : { status: 200, body: { replies: body.commands.map(() => ({ publish: {} })) } },
    );
    const taskId = await createTask('relay-user');
    const deps = {
      rows: new PostgresRealtimeOutbox(sql, realtimeClaimPolicy),
      publisher: new CentrifugoApiPublisher(api.url, 'secret-key'),
      clock: h.clock,
    };
    // One row, the creating commit's: the task's summary (its owner's channel, the platform operators'
    // and its tenant's operators'), its detail, and its implicit workflow's summary.
    expect(await relayRealtime(deps, 100)).toBe(1);
    expect(
      await sql`SELECT jsonb_array_length(messages) AS n FROM realtime_outbox WHERE status <> 'PUBLISHED'`,
    ).toEqual([{ n: 5 }]);
    expect(await statuses(taskId)).toEqual(['FAILED:1', 'FAILED:1', 'FAILED:1', 'FAILED:1']);
    // Not due yet: nothing is claimed before its back-off ends (at most 1.5 × 2 s for a first failure).
    expect(await relayRealtime(deps, 100)).toBe(0);
    h.clock.advance(3_001);
    await relayRealtime(deps, 100);
    expect(await statuses(taskId)).toEqual(['FAILED:2', 'FAILED:2', 'FAILED:2', 'FAILED:2']);
    h.clock.advance(6_001);
    await relayRealtime(deps, 100);
    expect(await statuses(taskId)).toEqual(['PUBLISHED:3', 'PUBLISHED:3', 'PUBLISHED:3', 'PUBLISHED:3']);
    expect(api.received).toHaveLength(3);
    const last = api.received.at(-1);
    expect(last.url).toBe('/api/batch');
    expect(last.headers['x-api-key']).toBe('secret-key');
    const commands = last.body.commands.filter((c: any) => c.publish.channel.startsWith('task_'));
    expect(commands.map((c: any) => c.publish.channel)).toEqual([
      `task_user:${app.tenantId}/${app.applicationId}/relay-user`,
      `task_detail:${app.tenantId}/${taskId}`,
      'task_ops:all',
      `task_ops:${app.tenantId}`,
    ]);
    expect(commands[0].publish.data).toMatchObject({ kind: 'task.summary', taskId });
  });

  it('sends a message the API refuses DEAD at once (and counts it); a 401 refuses the whole batch', async () => {
    await drain();
    const dead: string[] = [];
    const refusing = await fakeApi((_request, body) => ({
      status: 200,
      body: {
        replies: body.commands.map((c: any) =>
          c.publish.channel.startsWith('task_user:')
            ? { error: { code: 107, message: 'bad request' } }
            : { publish: {} },
        ),
      },
    }));
    const taskId = await createTask('relay-user-2');
    const observer = { dead: (message: { id: string }) => dead.push(message.id) };
    const rows = new PostgresRealtimeOutbox(sql, realtimeClaimPolicy);
    await relayRealtime(
      { rows, publisher: new CentrifugoApiPublisher(refusing.url, 'k'), clock: h.clock, observer },
      100,
    );
    expect(await statuses(taskId)).toEqual(['DEAD:1', 'PUBLISHED:1', 'PUBLISHED:1', 'PUBLISHED:1']);
    expect(dead).toHaveLength(1);

    await drain();
    const locked = await fakeApi(() => ({ status: 401 }));
    const second = await createTask('relay-user-3');
    await relayRealtime(
      { rows, publisher: new CentrifugoApiPublisher(locked.url, 'wrong'), clock: h.clock, observer },
      100,
    );
    expect(await statuses(second)).toEqual(['DEAD:1', 'DEAD:1', 'DEAD:1', 'DEAD:1']);
    // The task's four messages and its workflow's.
    expect(dead).toHaveLength(6);
  });

  it('retries only the messages of a row that failed for now; those that went are not sent again', async () => {
    await drain();
    let detailFailures = 1;
    const flaky = await fakeApi((_request, body) => ({
      status: 200,
      body: {
        replies: body.commands.map((c: any) =>
          c.publish.channel.startsWith('task_detail:') && detailFailures-- > 0
            ? { error: { code: 100, message: 'internal server error' } }
            : { publish: {} },
        ),
      },
    }));
    const taskId = await createTask('relay-user-4');
    const deps = {
      rows: new PostgresRealtimeOutbox(sql, realtimeClaimPolicy),
      publisher: new CentrifugoApiPublisher(flaky.url, 'k'),
      clock: h.clock,
    };
    await relayRealtime(deps, 100);
    const byChannel = async () =>
      Object.fromEntries(
        (
          await sql`SELECT channel, status, attempts FROM realtime_message WHERE aggregate_id = ${taskId}`
        ).map((r) => [r.channel.split(':')[0], `${r.status}:${r.attempts}`]),
      );
    expect(await byChannel()).toEqual({
      task_user: 'PUBLISHED:1',
      task_detail: 'FAILED:1',
      task_ops: 'PUBLISHED:1',
    });
    h.clock.advance(3_001);
    expect(await relayRealtime(deps, 100)).toBe(1);
    expect(await byChannel()).toEqual({
      task_user: 'PUBLISHED:1',
      task_detail: 'PUBLISHED:2',
      task_ops: 'PUBLISHED:1',
    });
    // The second request carried the detail alone.
    expect(flaky.received.at(-1).body.commands.map((c: any) => c.publish.channel)).toEqual([
      `task_detail:${app.tenantId}/${taskId}`,
    ]);
  });

  const twoMessages = [
    { id: 'm-1', channel: 'task_user:t/a/u', data: { n: 1 } },
    { id: 'm-2', channel: 'task_user:t/a/u', data: { n: 2 } },
  ];
  const ok = (body: any) => ({ status: 200, body: { replies: body.commands.map(() => ({ publish: {} })) } });

  it('sends a batch whose connection broke once more at once, with the same idempotency keys', async () => {
    let requests = 0;
    const api = await fakeApi((_request, body) => (++requests === 1 ? 'drop' : ok(body)));
    const outcomes = await new CentrifugoApiPublisher(api.url, 'k').publish(twoMessages);
    expect(outcomes).toEqual([{ ok: true }, { ok: true }]);
    expect(api.received).toHaveLength(2);
    for (const request of api.received)
      expect(request.body.commands.map((c: any) => c.publish.idempotency_key)).toEqual(['m-1', 'm-2']);
  });

  it('does not send again a batch that timed out: a hung API is left to the back-off', async () => {
    const api = await fakeApi(() => 'hang');
    const outcomes = await new CentrifugoApiPublisher(api.url, 'k', 200).publish(twoMessages);
    expect(outcomes.map((o) => o.ok)).toEqual([false, false]);
    expect(outcomes[0]).toMatchObject({ permanent: false, error: expect.stringContaining('unreachable') });
    expect(api.received).toHaveLength(1);
  });

  it('sends a round of many messages in requests of at most 1,000, in order', async () => {
    await drain();
    const api = await fakeApi((_request, body) => ({
      status: 200,
      body: { replies: body.commands.map(() => ({ publish: {} })) },
    }));
    const at = h.clock.now();
    const commit = (n: number) =>
      Array.from({ length: n }, (_, i) => ({
        id: newId(),
        tenantId: app.tenantId,
        aggregateType: 'TASK' as const,
        aggregateId: newId(),
        aggregateVersion: 1n,
        channel: `task_user:${app.tenantId}/${app.applicationId}/many-${i}`,
        projection: 'USER_SUMMARY' as const,
        payload: { kind: 'task.summary', lifecycleStatus: 'RUNNING', index: i },
        createdAt: at,
      }));
    const rows = [commit(700), commit(700)].map((records) => {
      const outboxId = newId();
      return records.map((record) => ({ ...record, outboxId }));
    });
    for (const records of rows) await insertRealtime(sql, records);
    const deps = {
      rows: new PostgresRealtimeOutbox(sql, realtimeClaimPolicy),
      publisher: new CentrifugoApiPublisher(api.url, 'k'),
      clock: h.clock,
    };
    expect(await relayRealtime(deps, 100)).toBe(2);
    expect(api.received.map((r) => r.body.commands.length)).toEqual([1_000, 400]);
    const indexes = api.received.flatMap((r) => r.body.commands.map((c: any) => c.publish.data.index));
    expect(indexes).toEqual([...rows[0]!, ...rows[1]!].map((r) => r.payload.index));
    const [left] = await sql`SELECT count(*)::int AS n FROM realtime_outbox WHERE status <> 'PUBLISHED'`;
    expect(left!.n).toBe(0);
  });

  it("publishes through TDP's own gateway run on its own, behind its server API, to a connected SDK client", async () => {
    await drain();
    const secret = 'standalone-gateway-secret-of-some-length';
    const gateway = new Gateway({ hmacKey: secret, apiKey: 'gateway-api-key' });
    const server = createServer((request, response) => {
      if (!gateway.handleHttp(request, response)) response.writeHead(404).end();
    });
    gateway.attach(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    servers.push(server);
    const base = `127.0.0.1:${(server.address() as { port: number }).port}`;
    const channel = `task_user:${app.tenantId}/${app.applicationId}/standalone-user`;
    const client = new Centrifuge(`ws://${base}/connection/websocket`, {
      websocket: WebSocket,
      token: await new SignJWT({ sub: 'standalone-user', channels: [channel] })
        .setProtectedHeader({ alg: 'HS256' })
        .setExpirationTime('5m')
        .sign(new TextEncoder().encode(secret)),
    });
    const seen: any[] = [];
    client.on('publication', (ctx) => seen.push(ctx.data));
    const subscribed = new Promise((resolve) => client.once('subscribed', resolve));
    client.connect();
    try {
      await subscribed;
      const taskId = await createTask('standalone-user');
      const deps = {
        rows: new PostgresRealtimeOutbox(sql, realtimeClaimPolicy),
        publisher: new CentrifugoApiPublisher(`http://${base}/api`, 'gateway-api-key'),
        clock: h.clock,
      };
      await relayRealtime(deps, 100);
      await expect.poll(() => seen.map((s) => s.taskId)).toEqual([taskId]);
      expect(await statuses(taskId)).toEqual(['PUBLISHED:1', 'PUBLISHED:1', 'PUBLISHED:1', 'PUBLISHED:1']);
    } finally {
      client.disconnect();
      await gateway.close();
    }
  });

  it('a relay that died after publishing and before marking sends again; the gateway knows the message ids and delivers once', async () => {
    await drain();
    const issued = (
      await h.request('POST', '/v1/realtime/connection-token', {
        token: app.apiKey,
        body: { userId: 'crash-user' },
      })
    ).body;
    const client = new Centrifuge(issued.url, { websocket: WebSocket, token: issued.token });
    const store = new TaskStore();
    const received: any[] = [];
    client.on('publication', (ctx) => received.push(ctx.data));
    const live = bindTaskStore({ centrifuge: client, store, loadTasks: async () => [] });
    client.connect();
    try {
      await expect.poll(() => store.connection).toBe('LIVE');
      const taskId = await createTask('crash-user');
      const rows = new PostgresRealtimeOutbox(sql, realtimeClaimPolicy);
      const publisher = gatewayPublisher(h.server.gateway);
      // The first relay publishes, then dies before it can mark the rows.
      const dying = {
        rows: Object.assign(Object.create(rows), {
          markPublished: async () => {
            throw new Error('killed before marking');
          },
        }),
        publisher,
        clock: h.clock,
      };
      await expect(relayRealtime(dying, 100)).rejects.toThrow('killed before marking');
      await expect.poll(() => received.length).toBe(1);
      const changes: string[] = [];
      store.subscribe(() => changes.push(store.summary(taskId)?.taskVersion ?? 'none'));
      expect(store.summary(taskId)?.taskVersion).toBe(received[0].taskVersion);
      // Its claim lapses; another relay claims the rows again and sends them a second time, each message
      // with its id as idempotency key: the gateway publishes nothing twice.
      h.clock.advance(realtimeClaimPolicy.leaseMs + 1);
      expect(await relayRealtime({ rows, publisher, clock: h.clock }, 100)).toBe(1);
      expect(await statuses(taskId)).toEqual(['PUBLISHED:2', 'PUBLISHED:2', 'PUBLISHED:2', 'PUBLISHED:2']);
      // A later task's message arrives after anything the second round could have delivered.
      const later = await createTask('crash-user');
      expect(await relayRealtime({ rows, publisher, clock: h.clock }, 100)).toBe(1);
      await expect.poll(() => received.map((r) => r.taskId)).toEqual([taskId, later]);
      expect(changes.filter((version) => version !== received[0].taskVersion)).toEqual([]);
    } finally {
      live.close();
      client.disconnect();
    }
  });
});

describe('the hand-off after commit', () => {
  it("publishes a commit's projections at once and marks them without a claim; what it could not publish the loop sends after its grace", async () => {
    let failNext = 1;
    const received: { channel: string; data: any }[][] = [];
    const api = createServer((request, response) => {
      let text = '';
      request.on('data', (chunk) => {
        text += chunk;
      });
      request.on('end', () => {
        const commands = JSON.parse(text).commands.map((c: any) => c.publish);
        received.push(commands);
        if (failNext-- > 0) return void response.writeHead(503).end();
        response
          .writeHead(200, { 'content-type': 'application/json' })
          .end(JSON.stringify({ replies: commands.map(() => ({ publish: {} })) }));
      });
    });
    await new Promise<void>((resolve) => api.listen(0, '127.0.0.1', resolve));
    const h = await startHarness({
      runLoops: true,
      centrifugoApi: { url: `http://127.0.0.1:${(api.address() as { port: number }).port}/api`, key: 'k' },
    });
    const sql = connectDatabase({ url: h.databaseUrl, maxConnections: 1 });
    try {
      const app = await h.createApplication();
      await h.request('POST', '/v1/workflow-definitions', {
        token: app.apiKey,
        body: {
          name: 'handoff',
          version: '1',
          steps: [{ key: 'only', capability: 'nobody.handoff', capabilityVersion: '1' }],
        },
      });
      await sql`UPDATE realtime_outbox SET status = 'PUBLISHED'`;
      const before = received.length;
      const create = async () =>
        (
          await h.request('POST', '/v1/tasks', {
            token: app.apiKey,
            headers: { 'idempotency-key': newId() },
            body: { workflowName: 'handoff', workflowVersion: '1', name: 'handed off', ownerId: 'u' },
          })
        ).body.task.id as string;
      const rowsOf = async (taskId: string) =>
        (await sql`SELECT status, attempts FROM realtime_message WHERE aggregate_id = ${taskId}`).map(
          (r) => `${r.status}:${r.attempts}`,
        );
      // The first hand-off meets a 503 (an answer: not sent again at once): its rows stay PENDING, not
      // claimable for 5 s.
      const failed = await create();
      await expect.poll(() => received.length).toBe(before + 1);
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      expect(await rowsOf(failed)).toEqual(['PENDING:0', 'PENDING:0', 'PENDING:0', 'PENDING:0']);
      // The next one goes straight through: published by the hand-off, never claimed.
      const handed = await create();
      await expect
        .poll(() => rowsOf(handed))
        .toEqual(['PUBLISHED:0', 'PUBLISHED:0', 'PUBLISHED:0', 'PUBLISHED:0']);
      expect(received.at(-1)!.some((c) => c.data.taskId === handed)).toBe(true);
      // Past the grace, the relay's loop claims the first task's rows and publishes them.
      h.clock.advance(5_001);
      await expect
        .poll(() => rowsOf(failed), { timeout: 5_000 })
        .toEqual(['PUBLISHED:1', 'PUBLISHED:1', 'PUBLISHED:1', 'PUBLISHED:1']);
      const sentFor = (taskId: string) =>
        received.flat().filter((c) => c.data.taskId === taskId && c.channel.startsWith('task_user:')).length;
      expect(sentFor(failed)).toBe(2);
      expect(sentFor(handed)).toBe(1);
    } finally {
      await sql.end();
      await h.close();
      await new Promise((resolve) => api.close(resolve));
    }
  });
});

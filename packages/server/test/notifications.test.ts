/**
 * Offline notifications (docs/notifications.md) on a real server and database: a terminal failure and
 * an action-required status leave one unread record per user who sees the task — once per key, however
 * often the relay retries the realtime messages of the same fact — listed unread first, marked read,
 * never shown to another user or application; and each is POSTed, signed, to a real webhook receiver,
 * retried with back-off and DEAD after the limit.
 */
import { createServer, type Server } from 'node:http';
import { TaskStore, TdpUserClient } from '@tdp/client';
import { newId, verifySignature } from '@tdp/protocol';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Harness, startHarness } from '../../../test/harness.ts';
import { coordinator, documentSteps } from '../../../test/statusFixture.ts';
import type { MergedWrites } from '../src/adapters/outbound/postgres/mergeWrites.ts';
import { pushNotificationStatements } from '../src/adapters/outbound/postgres/notificationTables.ts';
import type { RowStatement } from '../src/adapters/outbound/postgres/recordset.ts';
import { connectDatabase } from '../src/main.ts';

/** A real HTTP receiver: records every request; `answer` picks the status and reply per parsed body. */
async function receiver(answer: (body: any) => { status: number; body?: unknown }) {
  const received: { headers: Record<string, string | string[] | undefined>; text: string; body: any }[] = [];
  const server = createServer((request, response) => {
    let text = '';
    request.on('data', (chunk) => {
      text += chunk;
    });
    request.on('end', () => {
      const body = JSON.parse(text);
      received.push({ headers: request.headers, text, body });
      const reply = answer(body);
      response
        .writeHead(reply.status, { 'content-type': 'application/json' })
        .end(JSON.stringify(reply.body ?? {}));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, received, url: `http://127.0.0.1:${(server.address() as { port: number }).port}` };
}

async function until<T>(probe: () => Promise<T>, done: (value: T) => boolean, what: string): Promise<T> {
  for (let i = 0; i < 200; i++) {
    const value = await probe();
    if (done(value)) return value;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`timed out waiting for ${what}`);
}

let h: Harness;
let c: Awaited<ReturnType<typeof coordinator>>;
let sql: ReturnType<typeof connectDatabase>;
const servers: Server[] = [];
/** The relay's Centrifugo-compatible API fails while this is set. */
let realtimeDown = false;
/** Tasks whose notifications the webhook refuses (503). */
const refusedTasks = new Set<string>();
let webhook: Awaited<ReturnType<typeof receiver>>;
let realtimeApi: Awaited<ReturnType<typeof receiver>>;

beforeAll(async () => {
  webhook = await receiver((body) => ({ status: refusedTasks.has(body.taskId) ? 503 : 204 }));
  // Centrifugo's batch API: one reply per command.
  realtimeApi = await receiver((body) =>
    realtimeDown
      ? { status: 503 }
      : { status: 200, body: { replies: body.commands.map(() => ({ publish: {} })) } },
  );
  servers.push(webhook.server, realtimeApi.server);
  h = await startHarness({
    runLoops: true,
    centrifugoApi: { url: `${realtimeApi.url}/api`, key: 'api-key' },
    settings: {
      notificationDelivery: {
        webhookUrl: `${webhook.url}/notify`,
        maxAttempts: 3,
        maxBackoffSeconds: 8,
        timeoutMs: 2_000,
      },
    },
  });
  c = await coordinator(h);
  sql = connectDatabase({ url: h.databaseUrl, maxConnections: 2 });
});
afterAll(async () => {
  for (const server of servers) await new Promise((resolve) => server.close(resolve));
  await sql.end();
  await h.close();
});

const userToken = async (userId: string, apiKey = c.app.apiKey, extra: Record<string, unknown> = {}) =>
  (await h.request('POST', '/v1/user-tokens', { token: apiKey, body: { userId, ...extra } })).body
    .token as string;
const inbox = async (token: string, query = '') =>
  (await h.request('GET', `/v1/me/notifications${query}`, { token })).body;

/** A task of `ownerId` that `also` may see too, with its first step running. */
async function task(ownerId: string, also: string[] = [], tasks?: Record<string, unknown>[]) {
  const wf = await c.createWorkflow({ ownerId, ...(tasks ? { tasks } : {}) });
  const taskId = wf.tasks[0]!.taskId;
  for (const user of also)
    await c.call('POST', `/v1/tasks/${taskId}/acl`, { principalType: 'USER', principalId: user });
  await c.call('POST', `/v1/tasks/${taskId}/acl`, { principalType: 'ROLE', principalId: 'reviewers' });
  return { taskId, ctx: await c.activate(taskId, '01_prepare') };
}

const failTask = (taskId: string) =>
  c.call('POST', '/v1/task-events', {
    eventId: newId(),
    taskId,
    producerId: 'coordinator',
    sourceSeq: 1,
    eventType: 'TASK_FAILED',
    error: { category: 'BUSINESS', code: 'UNSUPPORTED_FILE_FORMAT', retryable: false },
  });

const notificationsOf = (taskId: string) =>
  sql<{ user_id: string; notification_type: string; status: string; attempts: number }[]>`
    SELECT user_id, notification_type, status, attempts FROM user_notification
    WHERE task_id = ${taskId} ORDER BY user_id`;

describe('offline notifications', () => {
  it('a terminal failure leaves one record per user who sees the task, however often the relay retries its messages', async () => {
    realtimeDown = true;
    const { taskId } = await task('alice', ['bob']);
    const failed = await failTask(taskId);
    expect(failed.body.lifecycleStatus).toBe('FAILED');
    const version = failed.body.taskVersion as string;
    // The hand-off fails; the relay's loop takes the rows after the grace, and fails again.
    const summaries = () =>
      sql<{ status: string; attempts: number }[]>`
        SELECT status, attempts FROM realtime_message
        WHERE aggregate_id = ${taskId} AND aggregate_version = ${version} AND projection = 'USER_SUMMARY'`;
    for (let round = 0; round < 2; round++) {
      const before = Math.min(...(await summaries()).map((r) => r.attempts));
      h.clock.advance(60_000);
      await until(summaries, (rows) => rows.every((r) => r.attempts > before), 'a relay retry');
    }
    realtimeDown = false;
    h.clock.advance(60_000);
    const published = await until(
      summaries,
      (rows) => rows.every((r) => r.status === 'PUBLISHED'),
      'the relay to publish',
    );
    expect(Math.min(...published.map((r) => r.attempts))).toBeGreaterThanOrEqual(2);
    // The owner and the ACL user; a role's members are told on the role's channel only.
    expect((await notificationsOf(taskId)).map((n) => `${n.user_id}:${n.notification_type}`)).toEqual([
      'alice:TASK_FAILED',
      'bob:TASK_FAILED',
    ]);
    const list = await inbox(await userToken('alice'));
    expect(list.items.filter((n: any) => n.taskId === taskId)).toMatchObject([
      { type: 'TASK_FAILED', severity: 'ERROR', taskVersion: version, readAt: null, requiresAction: false },
    ]);
  });

  it('writing the same key again (a replayed fact) creates nothing', async () => {
    const { taskId } = await task('dora');
    await failTask(taskId);
    const [row] = await sql`SELECT * FROM user_notification WHERE task_id = ${taskId}`;
    const statements: RowStatement[] = [];
    const again = {
      id: newId(),
      tenantId: row!.tenant_id,
      applicationId: row!.application_id,
      userId: row!.user_id,
      taskId,
      taskVersion: BigInt(row!.task_version),
      type: row!.notification_type,
      severity: 'ERROR',
      message: 'again',
      requiresAction: false,
      createdAt: new Date(),
    };
    pushNotificationStatements(
      { notifications: [again, { ...again, id: newId() }] } as MergedWrites,
      statements,
    );
    for (const statement of statements) await sql.unsafe(statement.text, [statement.rows]);
    expect(await sql`SELECT id, message FROM user_notification WHERE task_id = ${taskId}`).toEqual([
      { id: row!.id, message: row!.message },
    ]);
  });

  it('an action-required business status notifies; lists unread first, then newest; marks read', async () => {
    const define = await h.request(
      'POST',
      `/admin/v1/applications/${c.app.applicationId}/status-definitions`,
      {
        token: h.adminToken,
        body: {
          taskType: 'REVIEWED',
          version: 1,
          statuses: [
            {
              code: 'WAITING_REVIEW',
              displayName: 'Waiting for your review',
              lifecycleStatus: 'RUNNING',
              severity: 'ACTION_REQUIRED',
            },
          ],
        },
      },
    );
    expect(define.status).toBe(201);
    const typed = [
      {
        clientTaskKey: 'typed',
        title: 'Contract review',
        taskType: 'REVIEWED',
        statusDefinitionVersion: 1,
        knownSteps: documentSteps,
      },
    ];
    const first = await task('erin', [], typed);
    await failTask(first.taskId);
    h.clock.advance(1_000);
    const second = await task('erin', [], typed);
    const review = await c.report(
      second.ctx,
      c.event(second.ctx, { eventType: 'STEP_PROGRESS', businessStatus: 'WAITING_REVIEW' }),
    );
    expect(review.body.businessStatus).toBe('WAITING_REVIEW');
    const token = await userToken('erin');
    const before = await inbox(token);
    expect(before.unreadCount).toBe(2);
    expect(before.items.map((n: any) => `${n.taskId}:${n.type}`)).toEqual([
      `${second.taskId}:ACTION_REQUIRED`,
      `${first.taskId}:TASK_FAILED`,
    ]);
    expect(before.items[0]).toMatchObject({
      requiresAction: true,
      message: 'Contract review: Waiting for your review',
    });

    // The newer one read: the older, unread one comes first.
    const read = await h.request('POST', `/v1/me/notifications/${before.items[0].id}:read`, { token });
    expect(read.status).toBe(200);
    expect(read.body.readAt).not.toBeNull();
    const again = await h.request('POST', `/v1/me/notifications/${before.items[0].id}:read`, { token });
    expect(again.body.readAt).toBe(read.body.readAt);
    const after = await inbox(token);
    expect(after.unreadCount).toBe(1);
    expect(after.items.map((n: any) => n.id)).toEqual([before.items[1].id, before.items[0].id]);

    // One a page, through the cursor, in the same order.
    const page1 = await inbox(token, '?limit=1');
    const page2 = await inbox(token, `?limit=1&cursor=${page1.nextCursor}`);
    expect([...page1.items, ...page2.items].map((n: any) => n.id)).toEqual(after.items.map((n: any) => n.id));
    expect(page2.nextCursor).toBeNull();

    // The client's store shows the unread count; its REST client marks the rest read.
    const client = new TdpUserClient({ baseUrl: h.url, token });
    const store = new TaskStore();
    store.setNotifications(await client.notifications());
    expect(store.unreadNotifications).toBe(1);
    expect(await client.markAllNotificationsRead()).toEqual({ marked: 1 });
    store.allNotificationsRead();
    expect(store.unreadNotifications).toBe(0);
    expect((await client.notifications()).unreadCount).toBe(0);
    await expect(client.markNotificationRead(newId())).rejects.toMatchObject({
      status: 404,
      code: 'NOTIFICATION_NOT_FOUND',
    });
  });

  it('another user, another application or another tenant never sees or marks them; bad input is a problem', async () => {
    const { taskId } = await task('frank', ['grace']);
    await failTask(taskId);
    const mine = (await inbox(await userToken('frank'))).items.find((n: any) => n.taskId === taskId);
    expect(mine).toBeDefined();
    const other = await h.createApplication();
    const sameTenant = await h.createApplicationIn(c.app.tenantId);
    const strangers = [
      await userToken('heidi'),
      await userToken('frank', other.apiKey),
      await userToken('frank', sameTenant.apiKey),
      await userToken('somebody', c.app.apiKey, { roles: ['reviewers'] }),
    ];
    for (const token of strangers) {
      expect((await inbox(token)).items.some((n: any) => n.taskId === taskId)).toBe(false);
      const refused = await h.request('POST', `/v1/me/notifications/${mine.id}:read`, { token });
      expect(refused.status).toBe(404);
      expect(refused.headers.get('content-type')).toContain('application/problem+json');
      expect(refused.body.code).toBe('NOTIFICATION_NOT_FOUND');
    }
    // Not with the API key, nor without a token.
    expect((await h.request('GET', '/v1/me/notifications', { token: c.app.apiKey })).status).toBe(401);
    expect((await h.request('GET', '/v1/me/notifications')).status).toBe(401);
    const token = await userToken('frank');
    for (const [path, code] of [
      ['/v1/me/notifications?cursor=bm9wZQ', 'VALIDATION_FAILED'],
      ['/v1/me/notifications?limit=0', 'VALIDATION_FAILED'],
      ['/v1/me/notifications?colour=red', 'VALIDATION_FAILED'],
    ]) {
      const bad = await h.request('GET', path!, { token });
      expect(bad.status).toBe(400);
      expect(bad.headers.get('content-type')).toContain('application/problem+json');
      expect(bad.body.code).toBe(code);
    }
    const badId = await h.request('POST', '/v1/me/notifications/not-a-uuid:read', { token });
    expect(badId.status).toBeGreaterThanOrEqual(400);
    expect(badId.status).toBeLessThan(500);
    const [row] = await sql`SELECT read_at FROM user_notification WHERE id = ${mine.id}`;
    expect(row!.read_at).toBeNull();
  });

  it('each is POSTed to the webhook signed with its application secret; a failing receiver is retried with back-off, then DEAD', async () => {
    const { taskId: delivered } = await task('ivan');
    await failTask(delivered);
    const posted = await until(
      async () => webhook.received.filter((r) => r.body.taskId === delivered),
      (list) => list.length === 1,
      'the webhook delivery',
    );
    const [request] = posted;
    expect(request!.body).toMatchObject({
      kind: 'notification',
      userId: 'ivan',
      tenantId: c.app.tenantId,
      applicationId: c.app.applicationId,
      type: 'TASK_FAILED',
    });
    const signature = request!.headers['tdp-signature'] as string;
    const nowSeconds = Math.floor(h.clock.now().getTime() / 1000);
    expect(verifySignature(signature, request!.text, c.app.callbackSecret, nowSeconds).ok).toBe(true);
    const marked = await until(
      () => notificationsOf(delivered),
      (rows) => rows[0]?.status !== 'PUBLISHING',
      'the delivery to be recorded',
    );
    expect(marked[0]).toMatchObject({ status: 'PUBLISHED', attempts: 1 });

    const { taskId: refused } = await task('judy');
    refusedTasks.add(refused);
    await failTask(refused);
    const attempts = () => webhook.received.filter((r) => r.body.taskId === refused).length;
    await until(
      async () => attempts(),
      (n) => n === 1,
      'the first attempt',
    );
    const retried = await until(
      () => notificationsOf(refused),
      (rows) => rows[0]?.status !== 'PUBLISHING',
      'the failure to be recorded',
    );
    expect(retried[0]).toMatchObject({ status: 'FAILED', attempts: 1 });
    // Not again before its back-off (2 s, plus up to 1 s of spread) is over.
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(attempts()).toBe(1);
    h.clock.advance(10_000);
    await until(
      async () => attempts(),
      (n) => n === 2,
      'the second attempt',
    );
    await until(
      () => notificationsOf(refused),
      (rows) => rows[0]?.status === 'FAILED',
      'the second failure to be recorded',
    );
    h.clock.advance(10_000);
    await until(
      async () => attempts(),
      (n) => n === 3,
      'the third attempt',
    );
    const dead = await until(
      () => notificationsOf(refused),
      (rows) => rows[0]?.status === 'DEAD',
      'the delivery to go DEAD',
    );
    expect(dead[0]).toMatchObject({ status: 'DEAD', attempts: 3 });
    h.clock.advance(60_000);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(attempts()).toBe(3);
    // The record stays the person's to read.
    expect((await inbox(await userToken('judy'))).unreadCount).toBe(1);
  });
});

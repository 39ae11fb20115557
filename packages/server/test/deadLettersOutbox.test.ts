/**
 * The operator's requeue of DEAD rows of the domain outbox and the realtime relay
 * (`POST /admin/v1/dead-letters:requeue` with `table: "outbox" | "realtime"`), by ids or by a filter
 * (created time range, error text, application): the rows chosen are sent again — the event bus gets
 * the event, a client of the realtime gateway following the task gets the message — others are left
 * DEAD, and each call is audited. The relay publishes through TDP's gateway run on its own behind its
 * server API (as with Centrifugo), so the relay's rows are durable. Outbox rows are made DEAD with SQL
 * after their first publication, as the last of their failures would leave them (the failure path itself
 * is claimQueue.test.ts's); realtime rows become DEAD for real, the gateway's API refusing them, since a
 * message the gateway once accepted is not published again (its id is its idempotency key).
 */
import { createServer, type Server } from 'node:http';
import { Gateway } from '@tdp/gateway';
import { newId } from '@tdp/protocol';
import { Centrifuge } from 'centrifuge';
import { SignJWT } from 'jose';
import { afterAll, beforeAll, expect, it } from 'vitest';
import WebSocket from 'ws';
import { type Harness, startHarness, zipWorkflow } from '../../../test/harness.ts';
import type { DomainEvent } from '../src/core/outbox/ports.ts';
import { connectDatabase } from '../src/main.ts';

let h: Harness;
let app: Awaited<ReturnType<Harness['createApplication']>>;
let other: Awaited<ReturnType<Harness['createApplication']>>;
let sql: ReturnType<typeof connectDatabase>;
const published: DomainEvent[] = [];
const gatewaySecret = 'dead-letter-gateway-secret-of-some-length';
const gateway = new Gateway({ hmacKey: gatewaySecret, apiKey: 'gateway-api-key' });
let gatewayServer: Server;
let client: Centrifuge | null = null;
/** While set, the gateway's API refuses every request for good (400): what it is sent goes DEAD. */
let refusingApi = false;

beforeAll(async () => {
  gatewayServer = createServer((request, response) => {
    if (refusingApi && request.url?.startsWith('/api')) {
      request.resume();
      response.writeHead(400).end();
      return;
    }
    if (!gateway.handleHttp(request, response)) response.writeHead(404).end();
  });
  gateway.attach(gatewayServer);
  await new Promise<void>((resolve) => gatewayServer.listen(0, '127.0.0.1', resolve));
  h = await startHarness({
    runLoops: true,
    centrifugoApi: {
      url: `http://127.0.0.1:${(gatewayServer.address() as { port: number }).port}/api`,
      key: 'gateway-api-key',
    },
    publisher: {
      publish: async (event) => {
        published.push(event);
      },
    },
  });
  app = await h.createApplication();
  other = await h.createApplication();
  for (const a of [app, other])
    await h.request('POST', '/v1/workflow-definitions', { token: a.apiKey, body: zipWorkflow() });
  sql = connectDatabase({ url: h.databaseUrl, maxConnections: 1 });
});
afterAll(async () => {
  client?.disconnect();
  await sql.end();
  await h.close();
  await gateway.close();
  await new Promise((resolve) => gatewayServer.close(resolve));
});

const submit = async (apiKey: string, ownerId?: string) =>
  (
    await h.request('POST', '/v1/tasks', {
      token: apiKey,
      headers: { 'idempotency-key': newId() },
      body: {
        workflowName: 'zip-clean-watermark',
        workflowVersion: '1',
        name: 'dead letters',
        ...(ownerId ? { ownerId } : {}),
        input: { sourceZip: 'asset://z1', watermarkText: 'x' },
      },
    })
  ).body.task.id as string;
const requeue = (body: unknown) =>
  h.request('POST', '/admin/v1/dead-letters:requeue', { token: h.adminToken, body });
const statuses = async (table: 'outbox_event' | 'realtime_outbox', ids: string[]) =>
  (
    await sql<{ id: string; status: string }[]>`
      SELECT id, status FROM ${sql(table)} WHERE id = ANY(${ids}::uuid[]) ORDER BY id`
  ).map((r) => r.status);

/** Once the task's outbox rows are published, they are made DEAD with this error; their ids. */
async function deadRows(taskId: string, error: string) {
  await expect
    .poll(
      async () =>
        (await sql`SELECT 1 FROM outbox_event WHERE aggregate_id = ${taskId} AND status <> 'PUBLISHED'`)
          .length,
      { timeout: 10_000 },
    )
    .toBe(0);
  const rows = await sql<{ id: string }[]>`
    UPDATE outbox_event SET status = 'DEAD', attempts = 20, last_error = ${error}, published_at = NULL
    WHERE aggregate_id = ${taskId} RETURNING id`;
  expect(rows.length).toBeGreaterThan(0);
  return rows.map((r) => r.id);
}

it('requeues DEAD outbox rows by ids and by filter; the bus gets them again; the others stay DEAD; audited', async () => {
  const [first, second, third] = [
    await submit(app.apiKey),
    await submit(app.apiKey),
    await submit(other.apiKey),
  ];
  const firstIds = await deadRows(first, 'bus refused: subject too long');
  const secondIds = await deadRows(second, 'bus timed out');
  const thirdIds = await deadRows(third, 'bus timed out');
  const sentAgain = (ids: string[]) => published.filter((e) => ids.includes(e.id)).length;
  const before = published.length;

  // Bad input changes nothing: ids and a filter together, an unknown table, a filter field unknown.
  for (const bad of [
    { table: 'outbox', ids: firstIds, filter: { errorContains: 'x' }, reason: 'both' },
    { table: 'timers', reason: 'no such table' },
    { table: 'outbox', filter: { status: 'DEAD' }, reason: 'unknown field' },
    { table: 'outbox', filter: { createdFrom: 'yesterday' }, reason: 'not a time' },
  ]) {
    const answer = await requeue(bad);
    expect([answer.status, answer.body.code]).toEqual([400, 'VALIDATION_FAILED']);
  }
  expect(await statuses('outbox_event', [...firstIds, ...secondIds, ...thirdIds])).toEqual(
    Array(firstIds.length + secondIds.length + thirdIds.length).fill('DEAD'),
  );
  expect(published.length).toBe(before);

  const byIds = await requeue({ table: 'outbox', ids: firstIds, reason: 'bus fixed' });
  expect(byIds.status).toBe(200);
  expect([...byIds.body.requeued].sort()).toEqual([...firstIds].sort());
  await expect
    .poll(() => statuses('outbox_event', firstIds), { timeout: 10_000 })
    .toEqual(firstIds.map(() => 'PUBLISHED'));
  expect(sentAgain(firstIds)).toBe(firstIds.length * 2);

  // By filter: the error text and the application pick the second task's rows, not the third's.
  const byFilter = await requeue({
    table: 'outbox',
    filter: { errorContains: 'TIMED OUT', applicationId: app.applicationId },
    reason: 'timeouts of the first application',
  });
  expect([...byFilter.body.requeued].sort()).toEqual([...secondIds].sort());
  await expect
    .poll(() => statuses('outbox_event', secondIds), { timeout: 10_000 })
    .toEqual(secondIds.map(() => 'PUBLISHED'));
  expect(await statuses('outbox_event', thirdIds)).toEqual(thirdIds.map(() => 'DEAD'));

  // A time range that ends before the rows were made picks none of them.
  const [earliest] = await sql<{ created: Date }[]>`
    SELECT min(created_at) AS created FROM outbox_event WHERE id = ANY(${thirdIds}::uuid[])`;
  const created = earliest!.created;
  const tooEarly = await requeue({
    table: 'outbox',
    filter: { createdTo: created.toISOString() },
    reason: 'before them',
  });
  expect(tooEarly.body.requeued).toEqual([]);
  const inRange = await requeue({
    table: 'outbox',
    filter: { createdFrom: created.toISOString(), createdTo: new Date(created.getTime() + 1).toISOString() },
    reason: 'the rest',
  });
  expect(inRange.body.requeued.length).toBeGreaterThan(0);
  expect(thirdIds).toEqual(expect.arrayContaining(inRange.body.requeued));

  const audit = await sql`
    SELECT id, reason, details FROM operator_audit WHERE subject_id = 'outbox' ORDER BY created_at, id`;
  expect(audit.map((a) => a.reason).sort()).toEqual(
    ['before them', 'bus fixed', 'the rest', 'timeouts of the first application'].sort(),
  );
  expect(audit.find((a) => a.id === byFilter.body.auditId)?.details).toEqual({
    requested: null,
    filter: { errorContains: 'TIMED OUT', applicationId: app.applicationId },
    requeued: byFilter.body.requeued,
  });
});

/** A client of the gateway on the owner's task channel; the publications as they arrive. */
async function follow(channel: string): Promise<unknown[]> {
  const port = (gatewayServer.address() as { port: number }).port;
  client = new Centrifuge(`ws://127.0.0.1:${port}/connection/websocket`, {
    websocket: WebSocket,
    token: await new SignJWT({ sub: 'owner-1', channels: [channel] })
      .setProtectedHeader({ alg: 'HS256' })
      .setExpirationTime('5m')
      .sign(new TextEncoder().encode(gatewaySecret)),
  });
  const seen: unknown[] = [];
  client.on('publication', (ctx) => seen.push(ctx.data));
  const subscribed = new Promise((resolve) => client!.once('subscribed', resolve));
  client.connect();
  await subscribed;
  return seen;
}

it('requeues DEAD realtime rows: a client following the task gets the message', async () => {
  refusingApi = true;
  const taskId = await submit(app.apiKey, 'owner-1');
  // The hand-off's publish is refused; past its grace the relay's loop sends the rows, refused again: DEAD.
  const ofTask = sql`id IN (SELECT outbox_id FROM realtime_message WHERE aggregate_id = ${taskId})`;
  const notDead = async () =>
    (await sql`SELECT 1 FROM realtime_outbox WHERE ${ofTask} AND status <> 'DEAD'`).length;
  h.clock.advance(5_001);
  await expect.poll(notDead, { timeout: 10_000 }).toBe(0);
  refusingApi = false;
  const deadIds = (await sql<{ id: string }[]>`SELECT id FROM realtime_outbox WHERE ${ofTask}`).map(
    (r) => r.id,
  );
  expect(deadIds.length).toBeGreaterThan(0);
  const channel = `task_user:${app.tenantId}/${app.applicationId}/owner-1`;
  const received = await follow(channel);
  const [row] = await sql<{ id: string; payload: Record<string, unknown> }[]>`
    SELECT outbox_id AS id, payload FROM realtime_message
    WHERE outbox_id = ANY(${deadIds}::uuid[]) AND channel = ${channel} ORDER BY aggregate_version DESC LIMIT 1`;
  expect(row).toBeDefined();

  // The other application's filter picks none of this task's rows.
  const otherApp = await requeue({
    table: 'realtime',
    filter: { applicationId: other.applicationId },
    reason: 'not theirs',
  });
  expect(otherApp.body.requeued).toEqual([]);
  const requeued = await requeue({ table: 'realtime', ids: [row!.id], reason: 'gateway back' });
  expect(requeued.body).toMatchObject({ table: 'realtime', requeued: [row!.id] });
  await expect.poll(() => statuses('realtime_outbox', [row!.id]), { timeout: 10_000 }).toEqual(['PUBLISHED']);
  await expect.poll(() => received, { timeout: 10_000 }).toContainEqual(row!.payload);
  // The others of the task were not asked for: still DEAD.
  const others = deadIds.filter((id) => id !== row!.id);
  expect(await statuses('realtime_outbox', others)).toEqual(others.map(() => 'DEAD'));
});

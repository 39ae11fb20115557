/**
 * The isolation matrix (one rule, core/identity/userReach.ts): applications A and B in one tenant, C in
 * another, the same user in all three. Over every read path — REST by key, user tokens and /v1/me, the
 * gateway's connection and subscription tokens (the real `centrifuge` SDK), the native task stream and
 * its watch set, grants, callback logs, the dashboard — A sees only A's tasks, and never C's; then the
 * tenant names A tenant-wide (audited) and A's new tokens show the user B's tasks too, still never C's.
 */
import { newId } from '@tdp/protocol';
import { Centrifuge } from 'centrifuge';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { type Harness, startHarness } from '../../../test/harness.ts';
import { sseEvents } from '../../worker/src/sse.ts';

type App = Awaited<ReturnType<Harness['createApplication']>>;
let h: Harness;
let a: App;
let b: App;
let c: App;
const clients: Centrifuge[] = [];
const aborts: AbortController[] = [];

beforeAll(async () => {
  h = await startHarness({ runLoops: true });
  a = await h.createApplication();
  b = await h.createApplicationIn(a.tenantId);
  c = await h.createApplication();
  for (const app of [a, b, c])
    await h.request('POST', '/v1/workflow-definitions', {
      token: app.apiKey,
      body: {
        name: 'iso',
        version: '1',
        steps: [{ key: 'only', capability: 'nobody.iso', capabilityVersion: '1' }],
      },
    });
});
afterAll(async () => {
  for (const client of clients) client.disconnect();
  for (const abort of aborts) abort.abort();
  await h.close();
});

async function createTask(app: App, ownerId: string) {
  const created = await h.request('POST', '/v1/tasks', {
    token: app.apiKey,
    headers: { 'idempotency-key': newId() },
    body: { workflowName: 'iso', workflowVersion: '1', name: 'iso task', ownerId },
  });
  expect(created.status).toBe(201);
  return created.body.task.id as string;
}
const cancel = (app: App, taskId: string) =>
  h.request('POST', `/v1/tasks/${taskId}:cancel`, { token: app.apiKey });
const shareWithProject = (app: App, taskId: string, project: string) =>
  h.request('POST', `/v1/tasks/${taskId}/acl`, {
    token: app.apiKey,
    body: { principalType: 'PROJECT', principalId: project },
  });
const userToken = async (app: App, userId: string, projects: string[] = []) =>
  (await h.request('POST', '/v1/user-tokens', { token: app.apiKey, body: { userId, projects } })).body
    .token as string;

/** A connection through the app's connection token; every publication's task id is collected. */
async function connect(app: App, userId: string) {
  const issued = await h.request('POST', '/v1/realtime/connection-token', {
    token: app.apiKey,
    body: { userId },
  });
  expect(issued.status).toBe(200);
  const client = new Centrifuge(issued.body.url, { websocket: WebSocket, token: issued.body.token });
  clients.push(client);
  const seen: { taskId: string; lifecycleStatus: string }[] = [];
  client.on('publication', (ctx) => seen.push(ctx.data));
  const connected = new Promise((resolve) => client.once('connected', resolve));
  client.connect();
  await connected;
  return { client, seen, channels: issued.body.channels as string[] };
}

/** The native task stream with a user token; every event's data is collected. */
async function stream(token: string) {
  const abort = new AbortController();
  aborts.push(abort);
  const response = await fetch(`${h.url}/v1/me/task-stream?access_token=${encodeURIComponent(token)}`, {
    signal: abort.signal,
  });
  expect(response.status).toBe(200);
  const events: any[] = [];
  void (async () => {
    for await (const event of sseEvents(response.body!)) events.push(JSON.parse(event.data));
  })().catch(() => {});
  await expect.poll(() => events[0]?.kind).toBe('stream.ready');
  return { events, sessionId: events[0].sessionId as string };
}

const ids = (items: { taskId: string }[]) => items.map((i) => i.taskId);

describe('the isolation matrix: two applications of one tenant, and a second tenant', () => {
  it('REST by key: another application’s task does not exist, in every read and write', async () => {
    const ofB = await createTask(b, 'alice');
    const ofC = await createTask(c, 'alice');
    const ofA = await createTask(a, 'alice');
    for (const foreign of [ofB, ofC]) {
      for (const path of ['', '/events', '/timeline', '/callbacks']) {
        const read = await h.request('GET', `/v1/tasks/${foreign}${path}`, { token: a.apiKey });
        expect([read.status, read.body.code], path).toEqual([404, 'TASK_NOT_FOUND']);
        expect(read.headers.get('content-type')).toContain('application/problem+json');
      }
      expect((await cancel(a, foreign)).status).toBe(404);
      expect((await shareWithProject(a, foreign, 'p-a')).status).toBe(404);
    }
    const batch = await h.request('POST', '/v1/tasks/status:batchGet', {
      token: a.apiKey,
      body: { tasks: [{ taskId: ofA }, { taskId: ofB }, { taskId: ofC }] },
    });
    expect(batch.body.items.map((i: any) => i.found)).toEqual([true, false, false]);
    const list = await h.request('GET', '/v1/tasks?limit=200', { token: a.apiKey });
    expect(list.status).toBe(200);
    const listed = list.body.items.map((i: any) => i.task.id);
    expect(listed).toContain(ofA);
    expect(listed).not.toContain(ofB);
    expect(listed).not.toContain(ofC);
    // B's external reference and B's workflow do not exist for A, by key or through A's user token.
    const ref = `order-${newId()}`;
    expect(
      (await h.request('PUT', `/v1/tasks/${ofB}/external-refs/order/${ref}`, { token: b.apiKey })).status,
    ).toBeLessThan(300);
    expect((await h.request('GET', `/v1/external-refs/order/${ref}`, { token: b.apiKey })).body.taskId).toBe(
      ofB,
    );
    expect((await h.request('GET', `/v1/external-refs/order/${ref}`, { token: a.apiKey })).status).toBe(404);
    const workflowId = (await h.request('GET', `/v1/tasks/${ofB}`, { token: b.apiKey })).body.task.workflowId;
    for (const token of [a.apiKey, await userToken(a, 'alice')]) {
      const workflow = await h.request('GET', `/v1/workflows/${workflowId}`, { token });
      expect([workflow.status, workflow.body.code]).toEqual([404, 'WORKFLOW_NOT_FOUND']);
    }
    // The callback log of B's task is B's (a positive control that the path works).
    expect((await h.request('GET', `/v1/tasks/${ofB}/callbacks`, { token: b.apiKey })).status).toBe(200);
  });

  it('user tokens and /v1/me: the person’s tasks of the minting application only', async () => {
    const ofA = await createTask(a, 'bea');
    const ofB = await createTask(b, 'bea');
    const sharedInB = await createTask(b, 'someone');
    expect((await shareWithProject(b, sharedInB, 'p1')).status).toBe(204);
    const ofC = await createTask(c, 'bea');
    const token = await userToken(a, 'bea', ['p1']);
    const mine = await h.request('GET', '/v1/me/tasks?limit=50', { token });
    expect(ids(mine.body.items)).toEqual([ofA]);
    for (const foreign of [ofB, sharedInB, ofC])
      expect((await h.request('GET', `/v1/tasks/${foreign}/events`, { token })).body.code).toBe(
        'TASK_NOT_FOUND',
      );
    const batch = await h.request('POST', '/v1/tasks/status:batchGet', {
      token,
      body: { tasks: [ofA, ofB, sharedInB, ofC].map((taskId) => ({ taskId })) },
    });
    expect(batch.body.items.map((i: any) => i.found)).toEqual([true, false, false, false]);
  });

  it('connection and subscription tokens on the gateway: no summary or detail of another application', async () => {
    const viaA = await connect(a, 'carl');
    const viaB = await connect(b, 'carl');
    const viaC = await connect(c, 'carl');
    const ofB = await createTask(b, 'carl');
    const ofC = await createTask(c, 'carl');
    const ofA = await createTask(a, 'carl');
    // Each connection sees its own application's task (the channels work) …
    await expect.poll(() => ids(viaA.seen)).toContain(ofA);
    await expect.poll(() => ids(viaB.seen)).toContain(ofB);
    await expect.poll(() => ids(viaC.seen)).toContain(ofC);
    // … and then a change of every task, A's last: A's connection has seen B's and C's (it must not).
    await cancel(b, ofB);
    await cancel(c, ofC);
    await cancel(a, ofA);
    await expect
      .poll(() => viaA.seen.some((s) => s.taskId === ofA && s.lifecycleStatus === 'CANCELLED'))
      .toBe(true);
    await expect.poll(() => viaB.seen.some((s) => s.lifecycleStatus === 'CANCELLED')).toBe(true);
    expect(ids(viaA.seen)).not.toContain(ofB);
    expect(ids(viaA.seen)).not.toContain(ofC);
    expect(ids(viaB.seen)).not.toContain(ofA);
    expect(ids(viaC.seen)).not.toContain(ofA);
    expect(viaA.channels).toEqual([
      `task_user:${a.tenantId}/${a.applicationId}/carl`,
      `task_tenant:${a.tenantId}`,
      'task_system:public',
    ]);

    // A subscription token for another application's task, or another tenant's, is refused.
    for (const foreign of [ofB, ofC]) {
      const refused = await h.request('POST', '/v1/realtime/subscription-token', {
        token: a.apiKey,
        body: { userId: 'carl', taskId: foreign },
      });
      expect([refused.status, refused.body.code]).toEqual([404, 'TASK_NOT_FOUND']);
    }
  });

  it('the native task stream and its watch set: no summary or detail of another application', async () => {
    const opened = await stream(await userToken(a, 'dora', ['p2']));
    const ofB = await createTask(b, 'dora');
    const sharedInB = await createTask(b, 'someone');
    await shareWithProject(b, sharedInB, 'p2');
    const ofC = await createTask(c, 'dora');
    const ofA = await createTask(a, 'dora');
    const sharedInA = await createTask(a, 'someone');
    await shareWithProject(a, sharedInA, 'p2');
    await expect
      .poll(() => opened.events.map((e) => e.taskId), { timeout: 10_000 })
      .toEqual(expect.arrayContaining([ofA, sharedInA]));
    const seen = opened.events.map((e) => e.taskId);
    for (const foreign of [ofB, sharedInB, ofC]) expect(seen).not.toContain(foreign);

    const watch = (taskIds: string[], token: string) =>
      h.request('PUT', '/v1/me/task-watch-set', { token, body: { sessionId: opened.sessionId, taskIds } });
    const token = await userToken(a, 'dora', ['p2']);
    for (const foreign of [ofB, ofC]) {
      const refused = await watch([ofA, foreign], token);
      expect([refused.status, refused.body.code]).toEqual([404, 'TASK_NOT_FOUND']);
    }
    expect((await watch([ofA], token)).status).toBe(200);
    // B's token for the same person cannot touch A's stream.
    const other = await watch([], await userToken(b, 'dora'));
    expect([other.status, other.body.code]).toEqual([404, 'WATCH_SESSION_NOT_FOUND']);
  });

  it('grants, worker paths and the dashboard take no application key or user token', async () => {
    const token = await userToken(a, 'erin');
    for (const credential of [a.apiKey, token]) {
      const grant = await h.request('POST', `/v1/attempts/${newId()}/grants`, {
        token: credential,
        headers: { 'idempotency-key': newId() },
        body: { leaseVersion: 1, access: 'DOWNLOAD', resourceRef: 'asset:1' },
      });
      expect([grant.status, grant.body.code]).toEqual([401, 'UNAUTHENTICATED']);
      for (const path of [
        '/dashboard/api/tasks',
        '/dashboard/api/realtime-token',
        '/dashboard/api/workers',
      ]) {
        const dashboard = await h.request('GET', path, { token: credential });
        expect([dashboard.status, dashboard.body.code], path).toEqual([401, 'UNAUTHENTICATED']);
      }
    }
  });
});

describe('the tenant-wide user view (opt-in, audited)', () => {
  const setting = (tenantId: string, body: unknown, token = h.adminToken) =>
    h.request('PUT', `/admin/v1/tenants/${tenantId}/user-view`, { token, body });
  const current = async (tenantId: string) =>
    (await h.request('GET', `/admin/v1/tenants/${tenantId}/user-view`, { token: h.adminToken })).body;

  it('refuses bad input with a problem and changes nothing', async () => {
    const before = await current(a.tenantId);
    expect(before).toEqual({ tenantWideApplicationIds: [], audit: [] });
    const refusals = [
      [await setting(a.tenantId, { tenantWideApplicationIds: [c.applicationId] }), 400, 'VALIDATION_FAILED'],
      [await setting(a.tenantId, { tenantWideApplicationIds: [newId()] }), 400, 'VALIDATION_FAILED'],
      [await setting(a.tenantId, { tenantWideApplicationIds: ['not-a-uuid'] }), 400, 'VALIDATION_FAILED'],
      [await setting(a.tenantId, { applications: [a.applicationId] }), 400, 'VALIDATION_FAILED'],
      [await setting(newId(), { tenantWideApplicationIds: [] }), 404, 'TENANT_NOT_FOUND'],
      [
        await setting(a.tenantId, { tenantWideApplicationIds: [a.applicationId] }, a.apiKey),
        401,
        'UNAUTHENTICATED',
      ],
    ] as const;
    for (const [response, status, code] of refusals) {
      expect([response.status, response.body.code]).toEqual([status, code]);
      expect(response.headers.get('content-type')).toContain('application/problem+json');
    }
    expect(await current(a.tenantId)).toEqual(before);
  });

  it("a named application's new tokens show the user's tasks of the whole tenant, never another tenant's", async () => {
    const set = await setting(a.tenantId, { tenantWideApplicationIds: [a.applicationId] });
    expect(set.status).toBe(200);
    expect(set.body.tenantWideApplicationIds).toEqual([a.applicationId]);
    expect(set.body.audit).toEqual([
      expect.objectContaining({
        actor: 'bootstrap admin token',
        before: { tenantWideApplicationIds: [] },
        after: { tenantWideApplicationIds: [a.applicationId] },
      }),
    ]);
    const read = await h.request('GET', `/admin/v1/applications/${a.applicationId}`, { token: h.adminToken });
    expect(read.body.application.userView).toBe('TENANT');

    const viaA = await connect(a, 'finn');
    expect([...viaA.channels].sort()).toEqual(
      [
        ...[a.applicationId, b.applicationId].map((app) => `task_user:${a.tenantId}/${app}/finn`),
        `task_tenant:${a.tenantId}`,
        'task_system:public',
      ].sort(),
    );
    const opened = await stream(await userToken(a, 'finn'));
    const ofC = await createTask(c, 'finn');
    const ofB = await createTask(b, 'finn');
    const ofA = await createTask(a, 'finn');
    await expect.poll(() => ids(viaA.seen)).toEqual(expect.arrayContaining([ofA, ofB]));
    await expect.poll(() => opened.events.map((e) => e.taskId)).toEqual(expect.arrayContaining([ofA, ofB]));
    expect(ids(viaA.seen)).not.toContain(ofC);
    expect(opened.events.map((e) => e.taskId)).not.toContain(ofC);

    const token = await userToken(a, 'finn');
    const mine = await h.request('GET', '/v1/me/tasks?limit=50', { token });
    expect(ids(mine.body.items).sort()).toEqual([ofA, ofB].sort());
    expect((await h.request('GET', `/v1/tasks/${ofB}/events`, { token })).status).toBe(200);
    expect((await h.request('GET', `/v1/tasks/${ofC}/events`, { token })).status).toBe(404);
    const detail = await h.request('POST', '/v1/realtime/subscription-token', {
      token: a.apiKey,
      body: { userId: 'finn', taskId: ofB },
    });
    expect(detail.status).toBe(200);
    // Reads by key stay per application; B, not named, still shows only its own.
    expect((await h.request('GET', `/v1/tasks/${ofB}`, { token: a.apiKey })).status).toBe(404);
    const viaB = await h.request('GET', '/v1/me/tasks?limit=50', { token: await userToken(b, 'finn') });
    expect(ids(viaB.body.items)).toEqual([ofB]);

    // Withdrawn (audited again): tokens minted after it show A's tasks alone.
    const withdrawn = await setting(a.tenantId, { tenantWideApplicationIds: [] });
    expect(withdrawn.body.audit.map((e: any) => e.after.tenantWideApplicationIds)).toEqual([
      [a.applicationId],
      [],
    ]);
    const after = await h.request('GET', '/v1/me/tasks?limit=50', { token: await userToken(a, 'finn') });
    expect(ids(after.body.items)).toEqual([ofA]);
  });
});

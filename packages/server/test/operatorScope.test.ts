/**
 * Operators bound to one tenant see nothing of another on any path, and every operator action's audit
 * row says who did it (docs/operators.md). Two tenants A and B with tasks; an operator bound to A only,
 * a platform-wide viewer, a platform-wide operator and a platform admin, each a real account with a
 * personal token and a dashboard session. REST (the admin API and the dashboard's), the live feed
 * through the in-process gateway with the real `centrifuge` SDK, the charts and the audit; then the
 * audit's operator, session, tenant and task of each action, the timeline's names, and revocation.
 */
import { newId } from '@tdp/protocol';
import { Centrifuge } from 'centrifuge';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { type Harness, startHarness } from '../../../test/harness.ts';
import { createOperator, type DashboardSession, signIn, type TestOperator } from '../../../test/operators.ts';
import { startTestWorker } from '../../../test/testWorker.ts';
import { connectDatabase } from '../src/main.ts';

type App = Awaited<ReturnType<Harness['createApplication']>>;

let h: Harness;
let sql: ReturnType<typeof connectDatabase>;
let a: App;
let b: App;
/** Bound to tenant A only, with the operator role. */
let opA: TestOperator;
let sessionA: DashboardSession;
/** Platform-wide roles. */
let viewer: TestOperator;
let viewerSession: DashboardSession;
let platformOp: TestOperator;
let platformAdmin: TestOperator;
let worker: Awaited<ReturnType<typeof startTestWorker>>;
const clients: Centrifuge[] = [];
const names = { a: `tenant-a-${newId()}`, b: `tenant-b-${newId()}` };

/** Every workflow waits on something nobody gives unless a test does: tasks stay where they are. */
const workflows = [
  { name: 'scope-live', steps: [{ key: 'only', capability: 'scope.nobody', capabilityVersion: '1' }] },
  { name: 'scope-bulk', steps: [{ key: 'only', capability: 'scope.nobody', capabilityVersion: '1' }] },
  {
    name: 'scope-approve',
    steps: [
      {
        key: 'review',
        kind: 'approval',
        approval: { approvers: { users: ['rita'], roles: [], projects: [] } },
      },
    ],
  },
  { name: 'scope-signal', steps: [{ key: 'go', kind: 'signal', signal: { name: 'go' } }] },
];

async function submit(app: App, workflowName: string): Promise<string> {
  const created = await h.request('POST', '/v1/tasks', {
    token: app.apiKey,
    headers: { 'idempotency-key': newId() },
    body: { workflowName, workflowVersion: '1', name: `${workflowName} task`, ownerId: 'olga' },
  });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  return created.body.task.id as string;
}

const taskOf = async (app: App, taskId: string) =>
  (await h.request('GET', `/v1/tasks/${taskId}`, { token: app.apiKey })).body;
const waitingOn = (app: App, taskId: string, key: string, kind: string) =>
  expect
    .poll(
      async () =>
        (await taskOf(app, taskId)).execution.steps.find((s: any) => s.key === key)?.waitingFor?.kind,
      {
        timeout: 15_000,
      },
    )
    .toBe(kind);
/** Signs in with the operator's email and password (the login takes a `token` as the bootstrap's). */
const signInAs = (op: TestOperator) => signIn(h, { email: op.email, password: op.password });
const tokenIdOf = (token: string) => /^tdpo_([^_]+)_/.exec(token)![1]!;
/** The public id of an operator's (only) dashboard session, as the audit records it. */
const sessionIdOf = async (operatorId: string) =>
  (await sql<{ id: string }[]>`SELECT id FROM dashboard_session WHERE operator_id = ${operatorId}`)[0]!.id;
/** How many tasks the tenant has (null: every tenant). */
const taskCount = async (tenantId: string | null) =>
  (
    await sql<{ n: number }[]>`
      SELECT count(*)::int AS n FROM task WHERE ${tenantId}::uuid IS NULL OR tenant_id = ${tenantId}`
  )[0]!.n;
/** The audit as a platform-wide caller reads it. */
const auditOf = async (query: Record<string, string>) => {
  const read = await h.request('GET', `/admin/v1/audit?${new URLSearchParams(query)}`, {
    token: h.adminToken,
  });
  expect(read.status, JSON.stringify(read.body)).toBe(200);
  return read.body.items as any[];
};

beforeAll(async () => {
  h = await startHarness({ runLoops: true });
  sql = connectDatabase({ url: h.databaseUrl, maxConnections: 2 });
  a = await h.createApplication(names.a);
  b = await h.createApplication(names.b);
  for (const app of [a, b])
    for (const workflow of workflows) {
      const published = await h.request('POST', '/v1/workflow-definitions', {
        token: app.apiKey,
        body: { ...workflow, version: '1' },
      });
      expect(published.status, JSON.stringify(published.body)).toBe(201);
    }
  // B has a workflow and a capability of its own: neither is A's operator's to see.
  await h.request('POST', '/v1/workflow-definitions', {
    token: b.apiKey,
    body: {
      name: 'only-b',
      version: '1',
      steps: [{ key: 'x', capability: 'scope.b-only', capabilityVersion: '1' }],
    },
  });
  const workerKey = (
    await h.request('POST', '/admin/v1/worker-credentials', { token: h.adminToken, body: {} })
  ).body.key;
  worker = await startTestWorker({
    baseUrl: h.url,
    workerKey,
    nodeId: 'node-scope-b',
    capabilities: [{ name: 'scope.b-only', version: '1' }],
    handler: async () => {},
  });
  opA = await createOperator(h, [{ role: 'operator', tenantId: a.tenantId }], `ada-${newId().slice(-6)}`);
  viewer = await createOperator(h, [{ role: 'viewer' }]);
  platformOp = await createOperator(h, [{ role: 'operator' }]);
  platformAdmin = await createOperator(h, [{ role: 'admin' }]);
  sessionA = await signInAs(opA);
  viewerSession = await signInAs(viewer);
});
afterAll(async () => {
  for (const client of clients) client.disconnect();
  await worker?.stop();
  await sql?.end();
  await h?.close();
});

describe("a tenant-scoped operator's REST answers", () => {
  let taskA: string;
  let taskB: string;
  let correctedB: string;

  beforeAll(async () => {
    taskA = await submit(a, 'scope-live');
    taskB = await submit(b, 'scope-live');
    await submit(b, 'only-b');
    // Something happened on B's side: the platform admin corrected one of its tasks.
    correctedB = await submit(b, 'scope-live');
    const corrected = await h.request('POST', `/admin/v1/tasks/${correctedB}:correct`, {
      token: platformAdmin.token,
      body: { lifecycleStatus: 'CANCELLED', reason: 'B-side correction' },
    });
    expect(corrected.status, JSON.stringify(corrected.body)).toBe(200);
  });

  it("lists A's tasks only, with A's counts, applications and workflows", async () => {
    const list = await sessionA.request('GET', '/dashboard/api/tasks');
    expect(list.status).toBe(200);
    const ids = list.body.items.map((t: any) => t.id);
    expect(ids).toContain(taskA);
    expect(ids).not.toContain(taskB);
    expect(new Set(list.body.items.map((t: any) => t.tenantId))).toEqual(new Set([a.tenantId]));
    const counted = Object.values(list.body.counts as Record<string, number>).reduce((x, y) => x + y, 0);
    expect(counted).toBe(await taskCount(a.tenantId));
    expect(list.body.applications).toEqual([
      expect.objectContaining({ id: a.applicationId, tenantId: a.tenantId }),
    ]);
    expect(list.body.workflows).not.toContain('only-b');
    // Filtering by B's application finds nothing, as no such application were there.
    const filtered = await sessionA.request('GET', `/dashboard/api/tasks?applicationId=${b.applicationId}`);
    expect(filtered.body.items).toEqual([]);
    // The platform viewer sees both.
    const all = (await viewerSession.request('GET', '/dashboard/api/tasks')).body.items.map((t: any) => t.id);
    expect(all).toEqual(expect.arrayContaining([taskA, taskB]));
  });

  it("answers B's task as one that does not exist", async () => {
    const foreign = await sessionA.request('GET', `/dashboard/api/tasks/${taskB}`);
    expect([foreign.status, foreign.body.code]).toEqual([404, 'TASK_NOT_FOUND']);
    expect((await sessionA.request('GET', `/dashboard/api/tasks/${taskA}`)).status).toBe(200);
  });

  it("shows A's definitions and schedules only", async () => {
    for (const app of [a, b]) {
      const schedule = await h.request('POST', '/v1/schedules', {
        token: app.apiKey,
        headers: { 'idempotency-key': newId() },
        body: {
          cron: '0 * * * *',
          timeZone: 'UTC',
          workflowName: 'scope-live',
          workflowVersion: '1',
          overlap: 'ALLOW',
        },
      });
      expect(schedule.status, JSON.stringify(schedule.body)).toBe(201);
    }
    const definitions = (await sessionA.request('GET', '/dashboard/api/workflow-definitions')).body.items;
    expect(definitions.length).toBe(workflows.length);
    expect(new Set(definitions.map((d: any) => d.tenantName))).toEqual(new Set([names.a]));
    const schedules = (await sessionA.request('GET', '/dashboard/api/schedules')).body.items;
    expect(schedules.map((s: any) => s.tenantId)).toEqual([a.tenantId]);
    const everyone = (await viewerSession.request('GET', '/dashboard/api/schedules')).body.items;
    expect(everyone.map((s: any) => s.tenantId).sort()).toEqual([a.tenantId, b.tenantId].sort());
  });

  it("lists tenant A only on the admin API; B's applications, user view and broadcasts do not exist", async () => {
    const tenants = await h.request('GET', '/admin/v1/tenants', { token: opA.token });
    expect(tenants.body.map((t: any) => t.id)).toEqual([a.tenantId]);
    const apps = await h.request('GET', `/admin/v1/tenants/${b.tenantId}/applications`, { token: opA.token });
    expect([apps.status, apps.body.code]).toEqual([404, 'TENANT_NOT_FOUND']);
    expect(
      (await h.request('GET', `/admin/v1/tenants/${a.tenantId}/applications`, { token: opA.token })).status,
    ).toBe(200);
    const app = await h.request('GET', `/admin/v1/applications/${b.applicationId}`, { token: opA.token });
    expect([app.status, app.body.code]).toEqual([404, 'APPLICATION_NOT_FOUND']);
    const view = await h.request('GET', `/admin/v1/tenants/${b.tenantId}/user-view`, { token: opA.token });
    expect([view.status, view.body.code]).toEqual([404, 'TENANT_NOT_FOUND']);
    const broadcast = await h.request('POST', `/admin/v1/tenants/${b.tenantId}/broadcasts`, {
      token: opA.token,
      body: { title: 'hello', message: 'to B', severity: 'INFO' },
    });
    expect([broadcast.status, broadcast.body.code]).toEqual([404, 'TENANT_NOT_FOUND']);
    // The workers of B's capability are B's: A's operator does not see them, the platform viewer does.
    const workers = await h.request('GET', '/v1/workers', { token: opA.token });
    expect(workers.status).toBe(200);
    expect(workers.body.map((w: any) => w.id)).not.toContain(worker.workerId);
    const fleet = await h.request('GET', '/v1/workers', { token: viewer.token });
    expect(fleet.body.map((w: any) => w.id)).toContain(worker.workerId);
  });

  it("reads the audit of A's rows only, on the admin API and the dashboard", async () => {
    // A's own correction, so the audit has a row of A as well.
    const own = await h.request('POST', `/admin/v1/tasks/${await submit(a, 'scope-live')}:correct`, {
      token: opA.token,
      body: { lifecycleStatus: 'CANCELLED', reason: 'A-side correction' },
    });
    expect(own.status).toBe(200);
    for (const read of [
      (query: string) => h.request('GET', `/admin/v1/audit${query}`, { token: opA.token }),
      (query: string) => sessionA.request('GET', `/dashboard/api/audit${query}`),
    ]) {
      const items = (await read('?limit=200')).body.items as any[];
      expect(items.some((e) => e.reason === 'A-side correction')).toBe(true);
      expect(items.every((e) => e.tenantId === a.tenantId)).toBe(true);
      // Asking for B's rows by name finds none.
      expect((await read(`?tenantId=${b.tenantId}`)).body.items).toEqual([]);
      expect((await read(`?taskId=${correctedB}`)).body.items).toEqual([]);
    }
    // The platform viewer sees B's correction.
    const all = (await h.request('GET', `/admin/v1/audit?taskId=${correctedB}`, { token: viewer.token })).body
      .items;
    expect(all.map((e: any) => e.reason)).toEqual(['B-side correction']);
  });

  it("charts count A's tasks only, without the platform's gauges; workers and health are refused", async () => {
    const sum = (xs: number[]) => xs.reduce((x, y) => x + y, 0);
    const mine = await sessionA.request('GET', '/dashboard/api/charts?range=hour');
    expect(mine.status).toBe(200);
    expect(sum(mine.body.series.created)).toBe(await taskCount(a.tenantId));
    const theirs = (await viewerSession.request('GET', '/dashboard/api/charts?range=hour')).body;
    expect(sum(theirs.series.created)).toBe(await taskCount(null));
    expect(sum(theirs.series.created)).toBeGreaterThan(sum(mine.body.series.created));
    for (const [name, series] of Object.entries(mine.body.series as Record<string, unknown[]>))
      if (!['created', 'finished', 'submitToStartP50Ms', 'submitToStartP99Ms'].includes(name))
        expect(
          series.every((v) => v === null),
          name,
        ).toBe(true);
    // The platform viewer gets the gauges once the sampler has written a minute.
    await expect
      .poll(
        async () =>
          (
            await viewerSession.request('GET', '/dashboard/api/charts?range=hour')
          ).body.series.queueDepth.some((v: unknown) => v !== null),
        { timeout: 30_000, interval: 500 },
      )
      .toBe(true);
    for (const path of ['/dashboard/api/workers', '/dashboard/api/health']) {
      const refused = await sessionA.request('GET', path);
      expect([refused.status, refused.body.code], path).toEqual([403, 'FORBIDDEN']);
      expect((await viewerSession.request('GET', path)).status, path).toBe(200);
    }
  });

  it("cannot correct, approve or signal B's tasks: each is TASK_NOT_FOUND and changes nothing", async () => {
    const approveB = await submit(b, 'scope-approve');
    const signalB = await submit(b, 'scope-signal');
    await waitingOn(b, approveB, 'review', 'approval');
    await waitingOn(b, signalB, 'go', 'signal');
    const refusals = [
      await h.request('POST', `/admin/v1/tasks/${taskB}:correct`, {
        token: opA.token,
        body: { lifecycleStatus: 'CANCELLED', reason: 'not mine' },
      }),
      await h.request('POST', `/admin/v1/tasks/${approveB}/steps/review:approve`, {
        token: opA.token,
        headers: { 'idempotency-key': newId() },
        body: { reason: 'not mine' },
      }),
      await h.request('POST', `/admin/v1/tasks/${signalB}/signals/go`, {
        token: opA.token,
        headers: { 'idempotency-key': newId() },
        body: { payload: {}, reason: 'not mine' },
      }),
      await sessionA.request('POST', `/dashboard/api/tasks/${approveB}/steps/review/approve`, {
        reason: 'not mine',
        idempotencyKey: newId(),
      }),
      await sessionA.request('POST', `/dashboard/api/tasks/${signalB}/signals/go`, {
        reason: 'not mine',
        idempotencyKey: newId(),
        payload: {},
      }),
    ];
    for (const refused of refusals)
      expect([refused.status, refused.body.code]).toEqual([404, 'TASK_NOT_FOUND']);
    expect((await taskOf(b, taskB)).task.lifecycleStatus).toBe('PENDING');
    expect((await taskOf(b, approveB)).task.lifecycleStatus).toBe('RUNNING');
    expect((await taskOf(b, signalB)).task.lifecycleStatus).toBe('RUNNING');
  });

  it("a bulk cancel matching both tenants' tasks handles A's only; another's job does not exist", async () => {
    const bulkA = [await submit(a, 'scope-bulk'), await submit(a, 'scope-bulk')];
    const bulkB = [
      await submit(b, 'scope-bulk'),
      await submit(b, 'scope-bulk'),
      await submit(b, 'scope-bulk'),
    ];
    const started = await h.request('POST', '/admin/v1/tasks:bulkCancel', {
      token: opA.token,
      headers: { 'idempotency-key': newId() },
      body: { filter: { workflowName: 'scope-bulk' }, reason: 'clean up A' },
    });
    expect(started.status, JSON.stringify(started.body)).toBe(202);
    const job = () => h.request('GET', `/admin/v1/jobs/${started.body.jobId}`, { token: opA.token });
    expect((await job()).body.matched).toBe(bulkA.length);
    await expect.poll(async () => (await job()).body.status, { timeout: 15_000 }).toBe('SUCCEEDED');
    for (const id of bulkA) expect((await taskOf(a, id)).task.lifecycleStatus).toBe('CANCELLED');
    for (const id of bulkB) expect((await taskOf(b, id)).task.lifecycleStatus).toBe('PENDING');

    const platformJob = await h.request('POST', '/admin/v1/tasks:bulkCancel', {
      token: platformAdmin.token,
      headers: { 'idempotency-key': newId() },
      body: { filter: { workflowName: 'no-such-workflow' }, reason: 'platform job' },
    });
    expect(platformJob.status).toBe(202);
    const hidden = await h.request('GET', `/admin/v1/jobs/${platformJob.body.jobId}`, { token: opA.token });
    expect([hidden.status, hidden.body.code]).toEqual([404, 'JOB_NOT_FOUND']);
    expect(
      (await h.request('GET', `/admin/v1/jobs/${platformJob.body.jobId}`, { token: viewer.token })).status,
    ).toBe(200);
  });

  it("an Idempotency-Key is the caller's own: the same key and request from another operator start their own job", async () => {
    const key = `nightly-${newId()}`;
    const body = { filter: { workflowName: 'no-such-workflow' }, reason: 'the nightly script' };
    const send = (token: string) =>
      h.request('POST', '/admin/v1/tasks:bulkCancel', { token, headers: { 'idempotency-key': key }, body });
    const platform = await send(platformAdmin.token);
    expect(platform.status).toBe(202);
    // Not a replay of the platform's job (which A's operator may not read, and which reaches every tenant).
    const own = await send(opA.token);
    expect(own.status).toBe(202);
    expect(own.headers.get('idempotent-replayed')).toBeNull();
    expect(own.body.jobId).not.toBe(platform.body.jobId);
    expect((await h.request('GET', `/admin/v1/jobs/${own.body.jobId}`, { token: opA.token })).status).toBe(
      200,
    );
    // Each caller's retry answers their own job.
    const again = await send(opA.token);
    expect([again.body.jobId, again.headers.get('idempotent-replayed')]).toEqual([own.body.jobId, 'true']);
    expect((await send(platformAdmin.token)).body.jobId).toBe(platform.body.jobId);
  });

  it("a tenant broadcast's Idempotency-Key is the operator's own: B's operator is not refused for A's key", async () => {
    const opB = await createOperator(h, [{ role: 'operator', tenantId: b.tenantId }]);
    const key = `notice-${newId()}`;
    const broadcast = (op: TestOperator, tenantId: string) =>
      h.request('POST', `/admin/v1/tenants/${tenantId}/broadcasts`, {
        token: op.token,
        headers: { 'idempotency-key': key },
        body: { title: 'maintenance', message: 'tonight', severity: 'INFO' },
      });
    const ofA = await broadcast(opA, a.tenantId);
    expect(ofA.status).toBe(202);
    const ofB = await broadcast(opB, b.tenantId);
    expect(ofB.status, JSON.stringify(ofB.body)).toBe(202);
    expect(ofB.body.channel).toBe(`task_tenant:${b.tenantId}`);
    // The same operator's retry is still answered with their first broadcast.
    expect((await broadcast(opA, a.tenantId)).body.id).toBe(ofA.body.id);
  });
});

describe("a tenant-scoped operator's live feed", () => {
  const connect = async (session: DashboardSession) => {
    const issued = await session.request('GET', '/dashboard/api/realtime-token');
    expect(issued.status).toBe(200);
    const client = new Centrifuge(issued.body.url, { websocket: WebSocket, token: issued.body.token });
    clients.push(client);
    const seen: { channel: string; taskId: string }[] = [];
    client.on('publication', (ctx) => seen.push({ channel: ctx.channel, taskId: ctx.data.taskId }));
    const connected = new Promise((resolve) => client.once('connected', resolve));
    client.connect();
    await connected;
    return { client, seen, channels: issued.body.channels as string[] };
  };
  const refusal = (client: Centrifuge, channel: string) => {
    const sub = client.newSubscription(channel);
    const outcome = new Promise<number>((resolve) => sub.once('unsubscribed', (ctx) => resolve(ctx.code)));
    sub.subscribe();
    return outcome;
  };

  it("carries A's tasks on A's channel only; every task's channel and B's are refused", async () => {
    const mine = await connect(sessionA);
    expect(mine.channels).toEqual([`task_ops:${a.tenantId}`]);
    const all = await connect(viewerSession);
    expect(all.channels).toEqual(['task_ops:all']);

    const ofB = await submit(b, 'scope-live');
    const ofA = await submit(a, 'scope-live');
    await expect.poll(() => mine.seen.some((p) => p.taskId === ofA), { timeout: 10_000 }).toBe(true);
    await expect
      .poll(() => [ofA, ofB].every((id) => all.seen.some((p) => p.taskId === id)), { timeout: 10_000 })
      .toBe(true);
    expect(mine.seen.some((p) => p.taskId === ofB)).toBe(false);
    expect(new Set(mine.seen.map((p) => p.channel))).toEqual(new Set([`task_ops:${a.tenantId}`]));

    expect(await refusal(mine.client, 'task_ops:all')).toBe(103);
    expect(await refusal(mine.client, `task_ops:${b.tenantId}`)).toBe(103);
  });

  it('ends at once when the operator loses a tenant: the feed reconnects with what they may see now', async () => {
    const moved = await createOperator(h, [{ role: 'viewer', tenantId: a.tenantId }]);
    const session = await signInAs(moved);
    const feed = await connect(session);
    const disconnected = new Promise((resolve) => feed.client.once('disconnected', resolve));
    const reconnecting = new Promise((resolve) => feed.client.once('connecting', resolve));
    // The admin moves them from A to B: their open connection (its token said A) is closed.
    const changed = await h.request('PATCH', `/admin/v1/operators/${moved.id}`, {
      token: platformAdmin.token,
      body: { roles: [{ role: 'viewer', tenantId: b.tenantId }] },
    });
    expect(changed.status).toBe(200);
    await Promise.race([disconnected, reconnecting]);
    feed.client.disconnect();
    const again = await connect(session);
    expect(again.channels).toEqual([`task_ops:${b.tenantId}`]);
  });
});

describe('the audit says who', () => {
  const expectRow = async (
    query: Record<string, string>,
    who: { operatorId: string; sessionId: string },
    about: { tenantId: string | null; taskId?: string | null },
  ) => {
    const rows = await auditOf({ ...query, operatorId: who.operatorId });
    expect(rows.length, JSON.stringify(query)).toBeGreaterThan(0);
    expect(rows[0]).toMatchObject({ ...who, tenantId: about.tenantId, taskId: about.taskId ?? null });
    return rows[0];
  };
  const byToken = (op: TestOperator) => ({ operatorId: op.id, sessionId: tokenIdOf(op.token) });

  it('a correction, an approval and a signal carry the operator, their session or token, the tenant and task; the timeline names them', async () => {
    const corrected = await submit(a, 'scope-live');
    const answer = await h.request('POST', `/admin/v1/tasks/${corrected}:correct`, {
      token: opA.token,
      body: { lifecycleStatus: 'CANCELLED', reason: 'audited correction' },
    });
    expect(answer.status).toBe(200);
    const row = await expectRow({ action: 'TASK_CORRECTED', taskId: corrected }, byToken(opA), {
      tenantId: a.tenantId,
      taskId: corrected,
    });
    expect(row).toMatchObject({ actor: expect.stringContaining('ada-'), reason: 'audited correction' });
    expect(row.before).toMatchObject({ lifecycleStatus: 'PENDING' });
    expect(row.after).toMatchObject({ lifecycleStatus: 'CANCELLED' });

    const approved = await submit(a, 'scope-approve');
    await waitingOn(a, approved, 'review', 'approval');
    const decision = await sessionA.request('POST', `/dashboard/api/tasks/${approved}/steps/review/approve`, {
      reason: 'approved for rita',
      idempotencyKey: newId(),
    });
    expect(decision.status, JSON.stringify(decision.body)).toBe(200);
    await expectRow(
      { action: 'APPROVAL_DECIDED', taskId: approved },
      { operatorId: opA.id, sessionId: await sessionIdOf(opA.id) },
      { tenantId: a.tenantId, taskId: approved },
    );

    const signalled = await submit(a, 'scope-signal');
    await waitingOn(a, signalled, 'go', 'signal');
    const sent = await h.request('POST', `/admin/v1/tasks/${signalled}/signals/go`, {
      token: opA.token,
      headers: { 'idempotency-key': newId() },
      body: { payload: {}, reason: 'signalled for olga' },
    });
    expect(sent.status, JSON.stringify(sent.body)).toBe(202);
    await expectRow({ action: 'SIGNAL_SENT', taskId: signalled }, byToken(opA), {
      tenantId: a.tenantId,
      taskId: signalled,
    });

    const { displayName } = (await h.request('GET', '/admin/v1/me', { token: opA.token })).body.operator;
    for (const [taskId, kind] of [
      [corrected, 'ADMIN_CORRECTED'],
      [approved, 'approved for rita'],
      [signalled, 'signalled for olga'],
    ] as const) {
      const timeline = (await h.request('GET', `/v1/tasks/${taskId}/timeline`, { token: a.apiKey })).body
        .items;
      const entry = timeline.find((m: any) => m.kind === kind || String(m.message).includes(kind));
      expect(entry?.message, `${kind}: ${JSON.stringify(timeline)}`).toContain(displayName);
    }
  });

  it('a bulk cancel, a tenant broadcast and an API key rotation carry the operator and the tenant', async () => {
    const bulk = await h.request('POST', '/admin/v1/tasks:bulkRetry', {
      token: opA.token,
      headers: { 'idempotency-key': newId() },
      body: { filter: { workflowName: 'nothing-yet' }, reason: 'audited bulk' },
    });
    expect(bulk.status).toBe(202);
    await expectRow({ action: 'TASKS_BULK_RETRY', subjectId: bulk.body.jobId }, byToken(opA), {
      tenantId: a.tenantId,
    });
    const cancel = await h.request('POST', '/admin/v1/tasks:bulkCancel', {
      token: opA.token,
      headers: { 'idempotency-key': newId() },
      body: { filter: { workflowName: 'nothing-yet' }, reason: 'audited bulk' },
    });
    await expectRow({ action: 'TASKS_BULK_CANCEL', subjectId: cancel.body.jobId }, byToken(opA), {
      tenantId: a.tenantId,
    });

    const broadcast = await h.request('POST', `/admin/v1/tenants/${a.tenantId}/broadcasts`, {
      token: opA.token,
      body: { title: 'maintenance', message: 'tonight at ten', severity: 'INFO' },
    });
    expect(broadcast.status, JSON.stringify(broadcast.body)).toBe(202);
    await expectRow({ action: 'BROADCAST_TENANT' }, byToken(opA), { tenantId: a.tenantId });

    const adminA = await createOperator(h, [{ role: 'admin', tenantId: a.tenantId }]);
    const rotated = await h.request('POST', `/admin/v1/applications/${a.applicationId}/api-keys`, {
      token: adminA.token,
      body: {},
    });
    expect(rotated.status, JSON.stringify(rotated.body)).toBe(201);
    await expectRow({ action: 'API_KEY_ROTATED', subjectId: a.applicationId }, byToken(adminA), {
      tenantId: a.tenantId,
    });
  });

  it("the platform's actions (drain, cordon, requeue) carry the platform operator, with no tenant", async () => {
    const cordoned = await h.request('POST', `/admin/v1/workers/${worker.workerId}:cordon`, {
      token: platformOp.token,
      body: { reason: 'audited cordon' },
    });
    expect(cordoned.status, JSON.stringify(cordoned.body)).toBe(200);
    await expectRow({ action: 'WORKER_CORDON', subjectId: worker.workerId }, byToken(platformOp), {
      tenantId: null,
    });

    const session = await signInAs(platformOp);
    const drained = await session.request('POST', `/dashboard/api/workers/${worker.workerId}/drain`, {
      reason: 'audited drain',
    });
    expect(drained.status, JSON.stringify(drained.body)).toBe(202);
    await expectRow(
      { action: 'WORKER_DRAIN', subjectId: worker.workerId },
      { operatorId: platformOp.id, sessionId: await sessionIdOf(platformOp.id) },
      { tenantId: null },
    );

    const requeued = await h.request('POST', '/admin/v1/dead-letters:requeue', {
      token: platformOp.token,
      body: { table: 'callbacks', reason: 'audited requeue' },
    });
    expect(requeued.status, JSON.stringify(requeued.body)).toBe(200);
    const row = await expectRow({ action: 'DEAD_LETTERS_REQUEUE' }, byToken(platformOp), { tenantId: null });
    expect(row.id).toBe(requeued.body.auditId);
    // A's operator is not let near them.
    for (const refused of [
      await h.request('POST', `/admin/v1/workers/${worker.workerId}:uncordon`, {
        token: opA.token,
        body: { reason: 'no' },
      }),
      await h.request('POST', '/admin/v1/dead-letters:requeue', {
        token: opA.token,
        body: { table: 'callbacks', reason: 'no' },
      }),
    ])
      expect([refused.status, refused.body.code]).toEqual([403, 'FORBIDDEN']);
  });

  it('operator accounts and tokens carry the admin, or the operator issuing their own', async () => {
    const created = await h.request('POST', '/admin/v1/operators', {
      token: platformAdmin.token,
      body: { email: `carl-${newId()}@example.test`, displayName: 'Carl', roles: [{ role: 'viewer' }] },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    await expectRow({ action: 'OPERATOR_CREATED', subjectId: created.body.id }, byToken(platformAdmin), {
      tenantId: null,
    });
    const disabled = await h.request('PATCH', `/admin/v1/operators/${created.body.id}`, {
      token: platformAdmin.token,
      body: { status: 'DISABLED' },
    });
    expect(disabled.status).toBe(200);
    const change = await expectRow(
      { action: 'OPERATOR_CHANGED', subjectId: created.body.id },
      byToken(platformAdmin),
      {
        tenantId: null,
      },
    );
    expect([change.before.status, change.after.status]).toEqual(['ACTIVE', 'DISABLED']);

    const issued = await sessionA.request('POST', '/dashboard/api/operators/me/tokens', { name: 'script' });
    expect(issued.status, JSON.stringify(issued.body)).toBe(201);
    const viaSession = { operatorId: opA.id, sessionId: await sessionIdOf(opA.id) };
    const row = await expectRow({ action: 'OPERATOR_TOKEN_ISSUED', subjectId: opA.id }, viaSession, {
      tenantId: null,
    });
    expect(row.details.tokenId).toBe(issued.body.id);
    const revoked = await h.request('DELETE', `/admin/v1/operators/me/tokens/${issued.body.id}`, {
      token: opA.token,
    });
    expect(revoked.status).toBe(204);
    await expectRow({ action: 'OPERATOR_TOKEN_REVOKED', subjectId: opA.id }, byToken(opA), {
      tenantId: null,
    });
  });
});

describe('revocation', () => {
  const me = (op: { token: string }) => h.request('GET', '/admin/v1/me', { token: op.token });

  it('disabling an operator ends their session and their token at once; they cannot sign in again', async () => {
    const op = await createOperator(h, [{ role: 'operator', tenantId: a.tenantId }]);
    const session = await signInAs(op);
    expect((await session.request('GET', '/dashboard/api/me')).status).toBe(200);
    expect((await me(op)).status).toBe(200);
    const disabled = await h.request('PATCH', `/admin/v1/operators/${op.id}`, {
      token: h.adminToken,
      body: { status: 'DISABLED' },
    });
    expect(disabled.status).toBe(200);
    const ended = await session.request('GET', '/dashboard/api/me');
    expect([ended.status, ended.body.code]).toEqual([401, 'UNAUTHENTICATED']);
    const token = await me(op);
    expect([token.status, token.body.code]).toEqual([401, 'UNAUTHENTICATED']);
    await expect(signInAs(op)).rejects.toThrow(/401/);
  });

  it('signing an operator out everywhere ends every session; their token still works', async () => {
    const op = await createOperator(h, [{ role: 'viewer', tenantId: a.tenantId }]);
    const sessions = [await signInAs(op), await signInAs(op)];
    const out = await h.request('POST', `/admin/v1/operators/${op.id}/sign-out`, {
      token: platformAdmin.token,
    });
    expect([out.status, out.body]).toEqual([200, { sessionsEnded: 2 }]);
    for (const session of sessions)
      expect((await session.request('GET', '/dashboard/api/tasks')).status).toBe(401);
    expect((await me(op)).status).toBe(200);
    await expectAudit('OPERATOR_SIGNED_OUT', op.id, platformAdmin);
  });

  it('a revoked token is refused at once; the operator’s other token is not', async () => {
    const op = await createOperator(h, [{ role: 'viewer', tenantId: a.tenantId }]);
    const second = await h.request('POST', '/admin/v1/operators/me/tokens', {
      token: op.token,
      body: { name: 'two' },
    });
    expect(second.status).toBe(201);
    expect((await me({ token: second.body.token })).status).toBe(200);
    const revoked = await h.request('DELETE', `/admin/v1/operators/${op.id}/tokens/${second.body.id}`, {
      token: op.token,
    });
    expect(revoked.status).toBe(204);
    const refused = await me({ token: second.body.token });
    expect([refused.status, refused.body.code]).toEqual([401, 'UNAUTHENTICATED']);
    expect((await me(op)).status).toBe(200);
  });

  it('with TDP_ADMIN_TOKEN_ENABLED=false the bootstrap token opens neither the admin API nor the dashboard', async () => {
    // On this server it does.
    expect((await h.request('GET', '/admin/v1/tenants', { token: h.adminToken })).status).toBe(200);
    const off = await startHarness({ settings: { adminTokenEnabled: false } });
    try {
      const refused = await off.request('GET', '/admin/v1/tenants', { token: off.adminToken });
      expect([refused.status, refused.body.code]).toEqual([401, 'UNAUTHENTICATED']);
      const created = await off.request('POST', '/admin/v1/tenants', {
        token: off.adminToken,
        body: { name: 'x' },
      });
      expect(created.status).toBe(401);
      const login = await off.request('POST', '/dashboard/api/login', {
        headers: { origin: off.url },
        body: { token: off.adminToken },
      });
      expect([login.status, login.body.code]).toEqual([401, 'UNAUTHENTICATED']);
    } finally {
      await off.close();
    }
  });

  async function expectAudit(action: string, subjectId: string, by: TestOperator) {
    const rows = await auditOf({ action, subjectId });
    expect(rows[0]).toMatchObject({ operatorId: by.id, sessionId: tokenIdOf(by.token) });
  }
});

/**
 * The dashboard's queue page API (`/dashboard/api/queue`) on a real server: waiting and running counts
 * per tenant, application and concurrency key that follow the tasks as they wait and run, the share of
 * placements per minute, and the operator's changes (limit, pause, weights) with the admin API's role
 * rules, audited. An operator bound to one tenant sees and changes nothing of another.
 */
import { newId } from '@tdp/protocol';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Harness, startHarness } from '../../../test/harness.ts';
import { createOperator, type DashboardSession, signIn } from '../../../test/operators.ts';
import { attemptEvent, startTestWorker } from '../../../test/testWorker.ts';

const settings = { commandPollIntervalMs: 20, retryUnplaceableMs: 200, leaseCheckIntervalMs: 200 };

type App = Awaited<ReturnType<Harness['createApplication']>>;
let h: Harness;
let a: App;
let b: App;
let ticking: NodeJS.Timeout;
let worker: Awaited<ReturnType<typeof startTestWorker>>;
/** Attempts the worker holds until the test lets them finish. */
const held: (() => void)[] = [];
let opA: DashboardSession;
let viewerA: DashboardSession;
let platformOp: DashboardSession;

const workflow = {
  name: 'queue-keyed',
  version: '1',
  inputSchema: { type: 'object', required: ['customerId'], properties: { customerId: { type: 'string' } } },
  concurrency: [{ key: 'customer', value: '$.input.customerId', limit: 1 }],
  steps: [
    {
      key: 'work',
      capability: 'queue.work',
      capabilityVersion: '1',
      inputMapping: { customerId: '$.input.customerId' },
    },
  ],
};

async function submit(app: App, customerId: string) {
  const created = await h.request('POST', '/v1/tasks', {
    token: app.apiKey,
    headers: { 'idempotency-key': newId() },
    body: { workflowName: workflow.name, workflowVersion: '1', name: 'keyed', input: { customerId } },
  });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
}

const queueOf = async (session: DashboardSession) => {
  const read = await session.request('GET', '/dashboard/api/queue?minutes=10');
  expect(read.status, JSON.stringify(read.body)).toBe(200);
  return read.body;
};
/** Tenant A's line, its application and its key, as `session` reads them. */
const lineOfA = async (session: DashboardSession = opA) => {
  const queue = await queueOf(session);
  const tenant = queue.tenants.find((t: any) => t.id === a.tenantId);
  return {
    queue,
    tenant,
    application: tenant?.applications.find((x: any) => x.id === a.applicationId),
    key: tenant?.keys.find((k: any) => k.name === 'customer'),
  };
};

beforeAll(async () => {
  h = await startHarness({ runLoops: true, settings });
  // The test clock keeps up with real time (parked requests come due on it).
  ticking = setInterval(() => h.clock.advance(20), 20);
  a = await h.createApplication(`queue-a-${newId()}`);
  b = await h.createApplication(`queue-b-${newId()}`);
  for (const app of [a, b]) {
    const published = await h.request('POST', '/v1/workflow-definitions', {
      token: app.apiKey,
      body: workflow,
    });
    expect(published.status, JSON.stringify(published.body)).toBe(201);
  }
  const workerKey = (
    await h.request('POST', '/admin/v1/worker-credentials', { token: h.adminToken, body: { label: 'queue' } })
  ).body.key;
  worker = await startTestWorker({
    baseUrl: h.url,
    workerKey,
    nodeId: 'queue-node',
    capabilities: [{ name: 'queue.work', version: '1' }],
    maxConcurrency: 16,
    handler: async (command, report) => {
      await report([attemptEvent(command, 'STEP_STARTED', 1)]);
      await new Promise<void>((release) => held.push(release));
      await report([attemptEvent(command, 'STEP_COMPLETED', 2, { output: {}, durationMs: 1 })]);
    },
  });
  const signInAs = async (roles: Parameters<typeof createOperator>[1]) => {
    const op = await createOperator(h, roles);
    return signIn(h, { email: op.email, password: op.password });
  };
  opA = await signInAs([{ role: 'operator', tenantId: a.tenantId }]);
  viewerA = await signInAs([{ role: 'viewer', tenantId: a.tenantId }]);
  platformOp = await signInAs([{ role: 'operator' }]);
}, 60_000);
afterAll(async () => {
  clearInterval(ticking);
  for (const release of held.splice(0)) release();
  await worker?.stop();
  await h?.close();
});

describe('the queue page API', () => {
  it('counts waiting and running steps per tenant, application and key as tasks wait and run', async () => {
    for (let i = 0; i < 3; i += 1) await submit(a, '42');
    await submit(b, '7');

    // Customer 42's limit of 1: one runs, two wait parked on the key.
    await expect
      .poll(
        async () => {
          const { tenant, application, key } = await lineOfA();
          return [
            tenant?.waiting,
            tenant?.running,
            application?.waiting,
            application?.running,
            key?.waiting,
            key?.running,
          ];
        },
        { timeout: 15_000 },
      )
      .toEqual([2, 1, 2, 1, 2, 1]);
    const { queue, tenant, application, key } = await lineOfA();
    expect(key).toMatchObject({ limit: null, declaredLimit: 1, paused: false });
    expect(tenant).toMatchObject({ weight: 1, placed: 1, share: 1 });
    expect(application).toMatchObject({ weight: 1, placed: 1, share: 1 });
    // The chart: ten one-minute buckets, tenant A's single placement in one of them.
    expect(queue.chart.times).toHaveLength(10);
    const series = queue.chart.series.find((s: any) => s.tenantId === a.tenantId);
    expect(series.placed.reduce((x: number, y: number) => x + y, 0)).toBe(1);

    // The operator raises the limit: the parked two are placed, nothing waits.
    const raised = await opA.request('PUT', `/dashboard/api/queue/tenants/${a.tenantId}/keys/customer`, {
      limit: 3,
      reason: 'customer 42 bought more',
    });
    expect(raised.status, JSON.stringify(raised.body)).toBe(200);
    expect(raised.body).toMatchObject({ name: 'customer', limit: 3 });
    await expect
      .poll(
        async () => {
          const { tenant, key } = await lineOfA();
          return [tenant?.waiting, tenant?.running, tenant?.placed, key?.limit, key?.waiting, key?.running];
        },
        { timeout: 15_000 },
      )
      .toEqual([0, 3, 3, 3, 0, 3]);

    // They finish: nothing runs, the placements stay in the window.
    await expect.poll(() => held.length, { timeout: 10_000 }).toBeGreaterThanOrEqual(4);
    for (const release of held.splice(0)) release();
    await expect
      .poll(
        async () => {
          const { tenant, key } = await lineOfA();
          return [tenant?.running, tenant?.placed, key?.running];
        },
        { timeout: 15_000 },
      )
      .toEqual([0, 3, 0]);

    const audit = await h.request(
      'GET',
      `/admin/v1/audit?action=CONCURRENCY_KEY_CHANGED&tenantId=${a.tenantId}`,
      {
        token: h.adminToken,
      },
    );
    expect(audit.body.items).toMatchObject([
      {
        subjectId: 'customer',
        reason: 'customer 42 bought more',
        before: { limit: null },
        after: { limit: 3 },
      },
    ]);
  }, 60_000);

  it("shows a tenant's operator only their tenant, and lets them change nothing of another", async () => {
    const seen = await queueOf(opA);
    expect(seen.tenants.map((t: any) => t.id)).toEqual([a.tenantId]);
    expect(seen.chart.series.map((s: any) => s.tenantId)).toEqual([a.tenantId]);
    const platform = await queueOf(platformOp);
    expect(platform.tenants.map((t: any) => t.id)).toEqual(expect.arrayContaining([a.tenantId, b.tenantId]));

    const otherKey = await opA.request('PUT', `/dashboard/api/queue/tenants/${b.tenantId}/keys/customer`, {
      paused: true,
      reason: 'not mine',
    });
    expect(otherKey.status).toBe(404);
    expect(otherKey.body.code).toBe('TENANT_NOT_FOUND');
    const otherApp = await opA.request('PUT', `/dashboard/api/queue/applications/${b.applicationId}/weight`, {
      weight: 5,
      reason: 'not mine',
    });
    expect(otherApp.status).toBe(404);
    expect(otherApp.body.code).toBe('APPLICATION_NOT_FOUND');
    // A viewer of A reads but does not change; a tenant's own weight is the platform's to set.
    const byViewer = await viewerA.request(
      'PUT',
      `/dashboard/api/queue/tenants/${a.tenantId}/keys/customer`,
      {
        paused: true,
        reason: 'just looking',
      },
    );
    expect(byViewer.status).toBe(403);
    const ownTenant = await opA.request('PUT', `/dashboard/api/queue/tenants/${a.tenantId}/weight`, {
      weight: 5,
      reason: 'more for us',
    });
    expect(ownTenant.status).toBe(403);
    const paused = await h.request('GET', `/admin/v1/tenants/${b.tenantId}/concurrency-keys`, {
      token: h.adminToken,
    });
    expect(paused.body.items).toMatchObject([{ name: 'customer', paused: false }]);
  });

  it('sets weights with a reason (audited) and refuses bad changes with 400', async () => {
    const app = await opA.request('PUT', `/dashboard/api/queue/applications/${a.applicationId}/weight`, {
      weight: 2.5,
      reason: 'the checkout app first',
    });
    expect(app.status, JSON.stringify(app.body)).toBe(200);
    const tenant = await platformOp.request('PUT', `/dashboard/api/queue/tenants/${b.tenantId}/weight`, {
      weight: 4,
      reason: 'paying tier',
    });
    expect(tenant.status, JSON.stringify(tenant.body)).toBe(200);
    const platform = await queueOf(platformOp);
    const lineA = platform.tenants.find((t: any) => t.id === a.tenantId);
    expect(lineA.applications.find((x: any) => x.id === a.applicationId).weight).toBe(2.5);
    expect(platform.tenants.find((t: any) => t.id === b.tenantId).weight).toBe(4);
    const audit = await h.request('GET', '/admin/v1/audit?action=SCHEDULING_WEIGHT_CHANGED', {
      token: h.adminToken,
    });
    expect(audit.body.items.map((i: any) => [i.subjectId, i.reason])).toEqual(
      expect.arrayContaining([
        [`application:${a.applicationId}`, 'the checkout app first'],
        [`tenant:${b.tenantId}`, 'paying tier'],
      ]),
    );

    for (const [path, body] of [
      [`tenants/${a.tenantId}/keys/customer`, { limit: 0, reason: 'zero' }],
      [`tenants/${a.tenantId}/keys/customer`, { limit: 2 }],
      [`tenants/${a.tenantId}/keys/customer`, { limit: 2, reason: '   ' }],
      [`applications/${a.applicationId}/weight`, { weight: 0, reason: 'none' }],
    ] as const) {
      const refused = await opA.request('PUT', `/dashboard/api/queue/${path}`, body);
      expect(refused.status, JSON.stringify(body)).toBe(400);
      expect(refused.headers.get('content-type')).toContain('application/problem+json');
    }
    const unknown = await opA.request('PUT', `/dashboard/api/queue/tenants/${a.tenantId}/keys/nosuch`, {
      limit: 2,
      reason: 'typo',
    });
    expect(unknown.status).toBe(404);
    expect(unknown.body.code).toBe('CONCURRENCY_KEY_UNKNOWN');
  });
});

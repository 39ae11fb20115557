/**
 * An application's own tasks-in-flight quota on a real server and database (docs/scheduling.md#quotas):
 * an operator of its tenant sets it (audited, with a reason) through the admin API, creates past it get
 * 429 TASKS_IN_FLIGHT_LIMIT while other applications go by the platform setting, removing it restores
 * the setting, the dashboard's queue page shows it, and bad changes are refused with nothing changed.
 */
import { newId } from '@tdp/protocol';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Harness, startHarness, zipWorkflow } from '../../../test/harness.ts';
import { createOperator, type DashboardSession, signIn, type TestOperator } from '../../../test/operators.ts';

type App = Awaited<ReturnType<Harness['createApplication']>>;
let h: Harness;
let a: App;
let a2: App;
let b: App;
let operatorA: TestOperator;
let viewerA: TestOperator;
let platform: DashboardSession;

beforeAll(async () => {
  // The platform's limit is 4: above the quota of 2 set below, below the quota of 6.
  h = await startHarness({ settings: { tasksInFlightLimit: 4 } });
  a = await h.createApplication(`quota-a-${newId()}`);
  a2 = await h.createApplicationIn(a.tenantId, 'second');
  b = await h.createApplication(`quota-b-${newId()}`);
  // Definitions are the tenant's: A's second application shares A's. No worker serves zipWorkflow's
  // capabilities: its tasks stay unfinished.
  for (const app of [a, b]) {
    const published = await h.request('POST', '/v1/workflow-definitions', {
      token: app.apiKey,
      body: zipWorkflow(),
    });
    expect(published.status, JSON.stringify(published.body)).toBe(201);
  }
  operatorA = await createOperator(h, [{ role: 'operator', tenantId: a.tenantId }]);
  viewerA = await createOperator(h, [{ role: 'viewer', tenantId: a.tenantId }]);
  const platformOperator = await createOperator(h, [{ role: 'operator' }]);
  platform = await signIn(h, { email: platformOperator.email, password: platformOperator.password });
}, 60_000);

afterAll(async () => {
  await h?.close();
});

const submit = (app: App) =>
  h.request('POST', '/v1/tasks', {
    token: app.apiKey,
    headers: { 'idempotency-key': newId() },
    body: {
      workflowName: 'zip-clean-watermark',
      workflowVersion: '1',
      name: 'quota',
      input: { sourceZip: 'asset://a1' },
    },
  });

const setQuota = (applicationId: string, body: unknown, token = operatorA.token) =>
  h.request('PUT', `/admin/v1/applications/${applicationId}/quota`, { token, body });

/** The application's quota as the dashboard's queue page shows it. */
async function quotaOnDashboard(app: App): Promise<number | null | undefined> {
  const read = await platform.request('GET', '/dashboard/api/queue?minutes=15');
  expect(read.status, JSON.stringify(read.body)).toBe(200);
  const tenant = read.body.tenants.find((t: any) => t.id === app.tenantId);
  return tenant?.applications.find((x: any) => x.id === app.applicationId)?.tasksInFlightQuota;
}

const quotaAudit = async () =>
  (
    await h.request('GET', `/admin/v1/audit?action=APPLICATION_QUOTA_CHANGED&tenantId=${a.tenantId}`, {
      token: h.adminToken,
    })
  ).body.items;

describe("an application's tasks-in-flight quota", () => {
  it('refuses creates past the quota with 429, leaves other applications to the setting, and removing it restores the setting', async () => {
    const set = await setQuota(a.applicationId, { tasksInFlight: 2, reason: 'runaway backfill' });
    expect(set.status, JSON.stringify(set.body)).toBe(200);
    expect(set.body).toMatchObject({ applicationId: a.applicationId, tasksInFlight: 2 });
    expect(await quotaOnDashboard(a)).toBe(2);
    expect(await quotaOnDashboard(a2)).toBeNull();

    for (let i = 0; i < 2; i++) expect((await submit(a)).status).toBe(201);
    const refused = await submit(a);
    expect(refused.status).toBe(429);
    expect(refused.headers.get('content-type')).toContain('application/problem+json');
    expect(refused.body).toMatchObject({ code: 'TASKS_IN_FLIGHT_LIMIT', retryable: true });
    expect(refused.body.detail ?? refused.body.title).toBeDefined();
    expect(refused.headers.get('retry-after')).toBe('5');
    // The tenant's other application and another tenant's go by the platform's 4.
    for (const other of [a2, b]) {
      for (let i = 0; i < 4; i++) expect((await submit(other)).status).toBe(201);
      expect((await submit(other)).status).toBe(429);
    }

    // Removed: the platform's 4 applies again (creates see it within a second).
    const removed = await setQuota(a.applicationId, { tasksInFlight: null, reason: 'backfill done' });
    expect(removed.status, JSON.stringify(removed.body)).toBe(200);
    expect(removed.body.tasksInFlight).toBeNull();
    expect(await quotaOnDashboard(a)).toBeNull();
    await expect.poll(async () => (await submit(a)).status, { timeout: 5_000 }).toBe(201);
    expect((await submit(a)).status).toBe(201);
    expect((await submit(a)).status).toBe(429);

    // A quota may also be above the setting.
    expect((await setQuota(a.applicationId, { tasksInFlight: 6, reason: 'big customer' })).status).toBe(200);
    await expect.poll(async () => (await submit(a)).status, { timeout: 5_000 }).toBe(201);
    expect((await submit(a)).status).toBe(201);
    expect((await submit(a)).status).toBe(429);

    const audit = await quotaAudit();
    expect(audit).toEqual(
      expect.arrayContaining([
        expect.objectContaining({
          subjectId: a.applicationId,
          reason: 'runaway backfill',
          before: { tasksInFlight: null },
          after: { tasksInFlight: 2 },
        }),
        expect.objectContaining({
          reason: 'backfill done',
          before: { tasksInFlight: 2 },
          after: { tasksInFlight: null },
        }),
        expect.objectContaining({
          reason: 'big customer',
          before: { tasksInFlight: null },
          after: { tasksInFlight: 6 },
        }),
      ]),
    );
    expect(audit).toHaveLength(3);
  });

  it('refuses bad changes with a clear 4xx and changes nothing', async () => {
    const set = await setQuota(a2.applicationId, { tasksInFlight: 3, reason: 'before the bad ones' });
    expect(set.status, JSON.stringify(set.body)).toBe(200);
    const audited = (await quotaAudit()).length;

    for (const body of [
      { tasksInFlight: 0, reason: 'zero' },
      { tasksInFlight: -1, reason: 'negative' },
      { tasksInFlight: 1.5, reason: 'fraction' },
      { tasksInFlight: '2', reason: 'a string' },
      { tasksInFlight: 2 },
      { tasksInFlight: 2, reason: '' },
      { reason: 'no quota' },
      { tasksInFlight: 2, reason: 'extra', weight: 3 },
    ]) {
      const refused = await setQuota(a2.applicationId, body);
      expect(refused.status, JSON.stringify(body)).toBe(400);
      expect(refused.headers.get('content-type')).toContain('application/problem+json');
    }
    const unknown = await setQuota(newId(), { tasksInFlight: 2, reason: 'typo' });
    expect(unknown.status).toBe(404);
    expect(unknown.body.code).toBe('APPLICATION_NOT_FOUND');
    // An operator of tenant A learns nothing of tenant B's application, and a viewer changes nothing.
    const notMine = await setQuota(b.applicationId, { tasksInFlight: 1, reason: 'not mine' });
    expect(notMine.status).toBe(404);
    expect(notMine.body.code).toBe('APPLICATION_NOT_FOUND');
    const byViewer = await setQuota(a2.applicationId, { tasksInFlight: 1, reason: 'looking' }, viewerA.token);
    expect(byViewer.status).toBe(403);

    expect(await quotaOnDashboard(a2)).toBe(3);
    expect(await quotaOnDashboard(b)).toBeNull();
    expect((await quotaAudit()).length).toBe(audited);
  });
});

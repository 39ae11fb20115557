/**
 * The role × route matrix (issue 39, docs/operators.md): every route the server registers under
 * `/admin/v1/` and `/dashboard/api/` has a declared policy here — the least role and where it must be
 * held (platform-wide, or for the tenant of what the route touches) — written from the design's role
 * rules, not read off the code. A route without a row fails the first test, so no operator route ships
 * without one. Then, with real requests over personal tokens (admin API) and signed-in sessions (the
 * dashboard's API), for each route: no credential is 401; one role below the least is 403 FORBIDDEN (a
 * tenant-bound admin on a platform route too); the least role is let through (any answer but 401/403
 * and 5xx: a 4xx for a body the handler refuses still passed the gate); and a tenant-bound admin on
 * another tenant's resource gets that resource's not-found, as if it did not exist.
 */
import { randomBytes } from 'node:crypto';
import { newId } from '@tdp/protocol';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Harness, startHarness, zipWorkflow } from '../../../test/harness.ts';
import { createOperator, type DashboardSession, type Role, signIn } from '../../../test/operators.ts';
import { routesOf } from '../src/adapters/inbound/http/app.ts';

/** One tenant's resources a route may touch. */
interface Fixture {
  tenantId: string;
  applicationId: string;
  apiKeyId: string;
  taskId: string;
  /** A bulk job started by the tenant's own operator (its reach: this tenant only). */
  jobId: string;
  /** An operator account other than the caller (for the account routes). */
  operatorId: string;
}

interface Policy {
  least: Role;
  /** `platform`: a platform-wide binding; `tenant`: a binding for the tenant of what it touches (lists: their reach). */
  scope: 'platform' | 'tenant';
  /** The request on tenant `f`'s resources (routes on no one tenant's resource ignore `f`). */
  path: (f: Fixture) => string;
  body?: unknown;
  /** A route on one tenant's resource: the code that resource answers to an operator of another tenant. */
  missing?: string;
}

const reason = 'role matrix';
const uuid = () => newId();
const signal = { reason };
const notice = { title: 'matrix', message: 'a notice from the role matrix', severity: 'INFO' };

/**
 * The policy of every operator route, keyed `METHOD <path as registered>`. From the design's role rules:
 * viewer reads what their tenants hold; operator acts on tasks (corrections, approvals and signals on a
 * person's behalf, bulk cancel/retry, tenant broadcasts) and, platform-wide only, on workers, nodes, dead
 * letters and system broadcasts; admin manages applications, keys, secrets, definitions and the user view
 * of their tenants, and platform-wide only tenants, nodes' settings, operators and worker credentials.
 * Anyone signed in reads who they are and manages their own personal tokens.
 */
const policies: Record<string, Policy> = {
  // Tenants and applications.
  'POST /admin/v1/tenants': {
    least: 'admin',
    scope: 'platform',
    path: () => '/admin/v1/tenants',
    body: { name: `matrix-${randomBytes(3).toString('hex')}` },
  },
  'GET /admin/v1/tenants': { least: 'viewer', scope: 'tenant', path: () => '/admin/v1/tenants' },
  'POST /admin/v1/tenants/:tenantId/applications': {
    least: 'admin',
    scope: 'tenant',
    path: (f) => `/admin/v1/tenants/${f.tenantId}/applications`,
    body: { name: 'matrix-app' },
    missing: 'TENANT_NOT_FOUND',
  },
  'GET /admin/v1/tenants/:tenantId/applications': {
    least: 'viewer',
    scope: 'tenant',
    path: (f) => `/admin/v1/tenants/${f.tenantId}/applications`,
    missing: 'TENANT_NOT_FOUND',
  },
  'GET /admin/v1/tenants/:tenantId/user-view': {
    least: 'viewer',
    scope: 'tenant',
    path: (f) => `/admin/v1/tenants/${f.tenantId}/user-view`,
    missing: 'TENANT_NOT_FOUND',
  },
  'PUT /admin/v1/tenants/:tenantId/user-view': {
    least: 'admin',
    scope: 'tenant',
    path: (f) => `/admin/v1/tenants/${f.tenantId}/user-view`,
    body: { tenantWideApplicationIds: [] },
    missing: 'TENANT_NOT_FOUND',
  },
  'POST /admin/v1/tenants/:tenantId/broadcasts': {
    least: 'operator',
    scope: 'tenant',
    path: (f) => `/admin/v1/tenants/${f.tenantId}/broadcasts`,
    body: notice,
    missing: 'TENANT_NOT_FOUND',
  },
  'GET /admin/v1/applications/:id': {
    least: 'viewer',
    scope: 'tenant',
    path: (f) => `/admin/v1/applications/${f.applicationId}`,
    missing: 'APPLICATION_NOT_FOUND',
  },
  'PUT /admin/v1/applications/:id/resource-provider': {
    least: 'admin',
    scope: 'tenant',
    path: (f) => `/admin/v1/applications/${f.applicationId}/resource-provider`,
    body: { url: 'https://provider.example.test/resources', bearerToken: 'matrix' },
    missing: 'APPLICATION_NOT_FOUND',
  },
  'POST /admin/v1/applications/:id/api-keys': {
    least: 'admin',
    scope: 'tenant',
    path: (f) => `/admin/v1/applications/${f.applicationId}/api-keys`,
    body: {},
    missing: 'APPLICATION_NOT_FOUND',
  },
  'DELETE /admin/v1/applications/:id/api-keys/:keyId': {
    least: 'admin',
    scope: 'tenant',
    path: (f) => `/admin/v1/applications/${f.applicationId}/api-keys/${f.apiKeyId}`,
    missing: 'APPLICATION_NOT_FOUND',
  },
  'POST /admin/v1/applications/:id/callback-secret': {
    least: 'admin',
    scope: 'tenant',
    path: (f) => `/admin/v1/applications/${f.applicationId}/callback-secret`,
    body: {},
    missing: 'APPLICATION_NOT_FOUND',
  },
  'POST /admin/v1/applications/:id/status-definitions': {
    least: 'admin',
    scope: 'tenant',
    path: (f) => `/admin/v1/applications/${f.applicationId}/status-definitions`,
    body: {
      taskType: 'MATRIX',
      version: 1,
      statuses: [{ code: 'DONE', displayName: 'Done', lifecycleStatus: 'SUCCEEDED' }],
    },
    missing: 'APPLICATION_NOT_FOUND',
  },
  'GET /admin/v1/applications/:id/status-definitions': {
    least: 'viewer',
    scope: 'tenant',
    path: (f) => `/admin/v1/applications/${f.applicationId}/status-definitions`,
    missing: 'APPLICATION_NOT_FOUND',
  },
  'POST /admin/v1/applications/:id/operation-definitions': {
    least: 'admin',
    scope: 'tenant',
    path: (f) => `/admin/v1/applications/${f.applicationId}/operation-definitions`,
    body: {
      operationCode: 'MATRIX.OP',
      version: 1,
      displayName: 'Matrix',
      producerPattern: 'matrix',
      allowedEventTypes: ['STEP_STARTED'],
      dataSchemas: {},
    },
    missing: 'APPLICATION_NOT_FOUND',
  },
  'GET /admin/v1/applications/:id/operation-definitions': {
    least: 'viewer',
    scope: 'tenant',
    path: (f) => `/admin/v1/applications/${f.applicationId}/operation-definitions`,
    missing: 'APPLICATION_NOT_FOUND',
  },
  // Fair share (docs/scheduling.md): a tenant's keys and its applications' weights are its operators';
  // a tenant's own weight against the others is the platform's.
  'GET /admin/v1/tenants/:tenantId/concurrency-keys': {
    least: 'viewer',
    scope: 'tenant',
    path: (f) => `/admin/v1/tenants/${f.tenantId}/concurrency-keys`,
    missing: 'TENANT_NOT_FOUND',
  },
  'PUT /admin/v1/tenants/:tenantId/concurrency-keys/:name': {
    least: 'operator',
    scope: 'tenant',
    path: (f) => `/admin/v1/tenants/${f.tenantId}/concurrency-keys/matrix`,
    body: { paused: false, reason },
    missing: 'TENANT_NOT_FOUND',
  },
  'PUT /admin/v1/tenants/:id/scheduling-weight': {
    least: 'operator',
    scope: 'platform',
    path: (f) => `/admin/v1/tenants/${f.tenantId}/scheduling-weight`,
    body: { weight: 1, reason },
  },
  'PUT /admin/v1/applications/:id/scheduling-weight': {
    least: 'operator',
    scope: 'tenant',
    path: (f) => `/admin/v1/applications/${f.applicationId}/scheduling-weight`,
    body: { weight: 1, reason },
    missing: 'APPLICATION_NOT_FOUND',
  },
  'PUT /admin/v1/applications/:id/fairness-keys/:key/weight': {
    least: 'operator',
    scope: 'tenant',
    path: (f) => `/admin/v1/applications/${f.applicationId}/fairness-keys/customer-1/weight`,
    body: { weight: 2, reason },
    missing: 'APPLICATION_NOT_FOUND',
  },
  'PUT /admin/v1/applications/:id/quota': {
    least: 'operator',
    scope: 'tenant',
    path: (f) => `/admin/v1/applications/${f.applicationId}/quota`,
    body: { tasksInFlight: 100_000, reason },
    missing: 'APPLICATION_NOT_FOUND',
  },

  // Acting on tasks.
  'POST /admin/v1/tasks/:id(^[0-9a-fA-F-]{36})::correct': {
    least: 'operator',
    scope: 'tenant',
    path: (f) => `/admin/v1/tasks/${f.taskId}:correct`,
    body: { lifecycleStatus: 'PENDING', businessStatus: 'CHECKED_BY_MATRIX', reason },
    missing: 'TASK_NOT_FOUND',
  },
  'POST /admin/v1/tasks/:id(^[0-9a-fA-F-]{36})/steps/:key(^[A-Za-z0-9_.-]+)::approve': {
    least: 'operator',
    scope: 'tenant',
    path: (f) => `/admin/v1/tasks/${f.taskId}/steps/clean:approve`,
    body: { reason },
    missing: 'TASK_NOT_FOUND',
  },
  'POST /admin/v1/tasks/:id(^[0-9a-fA-F-]{36})/steps/:key(^[A-Za-z0-9_.-]+)::reject': {
    least: 'operator',
    scope: 'tenant',
    path: (f) => `/admin/v1/tasks/${f.taskId}/steps/clean:reject`,
    body: { reason },
    missing: 'TASK_NOT_FOUND',
  },
  'POST /admin/v1/tasks/:id/signals/:name': {
    least: 'operator',
    scope: 'tenant',
    path: (f) => `/admin/v1/tasks/${f.taskId}/signals/matrix`,
    body: signal,
    missing: 'TASK_NOT_FOUND',
  },
  // Bulk jobs match the caller's tenants only (their reach): no one tenant's resource to refuse.
  'POST /admin/v1/tasks::bulkCancel': {
    least: 'operator',
    scope: 'tenant',
    path: () => '/admin/v1/tasks:bulkCancel',
    body: { filter: { workflowName: 'matrix-matches-nothing' }, reason },
  },
  'POST /admin/v1/tasks::bulkRetry': {
    least: 'operator',
    scope: 'tenant',
    path: () => '/admin/v1/tasks:bulkRetry',
    body: { filter: { workflowName: 'matrix-matches-nothing' }, reason },
  },
  'GET /admin/v1/jobs/:id': {
    least: 'viewer',
    scope: 'tenant',
    path: (f) => `/admin/v1/jobs/${f.jobId}`,
    missing: 'JOB_NOT_FOUND',
  },

  // The platform's own: workers, nodes, dead letters, system broadcasts, worker keys.
  'POST /admin/v1/workers/:id(^[0-9a-fA-F-]{36})::drain': {
    least: 'operator',
    scope: 'platform',
    path: () => `/admin/v1/workers/${uuid()}:drain`,
    body: { reason },
  },
  'POST /admin/v1/workers/:id(^[0-9a-fA-F-]{36})::cordon': {
    least: 'operator',
    scope: 'platform',
    path: () => `/admin/v1/workers/${uuid()}:cordon`,
    body: { reason },
  },
  'POST /admin/v1/workers/:id(^[0-9a-fA-F-]{36})::uncordon': {
    least: 'operator',
    scope: 'platform',
    path: () => `/admin/v1/workers/${uuid()}:uncordon`,
    body: { reason },
  },
  'POST /admin/v1/nodes/:id(^[^/]+?)::drain': {
    least: 'operator',
    scope: 'platform',
    path: () => '/admin/v1/nodes/matrix-node:drain',
    body: { reason },
  },
  'POST /admin/v1/nodes/:id(^[^/]+?)::cordon': {
    least: 'operator',
    scope: 'platform',
    path: () => '/admin/v1/nodes/matrix-node:cordon',
    body: { reason },
  },
  'POST /admin/v1/nodes/:id(^[^/]+?)::uncordon': {
    least: 'operator',
    scope: 'platform',
    path: () => '/admin/v1/nodes/matrix-node:uncordon',
    body: { reason },
  },
  // A node's trusted labels, group and weight are settings of the fleet: an admin's.
  'PUT /admin/v1/nodes/:id': {
    least: 'admin',
    scope: 'platform',
    path: () => '/admin/v1/nodes/matrix-node',
    body: { weight: 1 },
  },
  'POST /admin/v1/broadcasts': {
    least: 'operator',
    scope: 'platform',
    path: () => '/admin/v1/broadcasts',
    body: { message: 'a notice from the role matrix', severity: 'INFO' },
  },
  'POST /admin/v1/dead-letters::requeue': {
    least: 'operator',
    scope: 'platform',
    path: () => '/admin/v1/dead-letters:requeue',
    body: { table: 'outbox', filter: { errorContains: 'matrix-matches-nothing' }, reason },
  },
  'POST /admin/v1/worker-credentials': {
    least: 'admin',
    scope: 'platform',
    path: () => '/admin/v1/worker-credentials',
    body: {},
  },
  'DELETE /admin/v1/worker-credentials/:id': {
    least: 'admin',
    scope: 'platform',
    path: () => `/admin/v1/worker-credentials/${uuid()}`,
  },

  // Who is asking, the audit, operator accounts and personal tokens.
  'GET /admin/v1/me': { least: 'viewer', scope: 'tenant', path: () => '/admin/v1/me' },
  'GET /admin/v1/audit': { least: 'viewer', scope: 'tenant', path: () => '/admin/v1/audit' },
  ...accountRoutes('/admin/v1'),

  // The dashboard's API.
  'GET /dashboard/api/me': { least: 'viewer', scope: 'tenant', path: () => '/dashboard/api/me' },
  'GET /dashboard/api/realtime-token': {
    least: 'viewer',
    scope: 'tenant',
    path: () => '/dashboard/api/realtime-token',
  },
  'GET /dashboard/api/tasks': { least: 'viewer', scope: 'tenant', path: () => '/dashboard/api/tasks' },
  'GET /dashboard/api/tasks/:id': {
    least: 'viewer',
    scope: 'tenant',
    path: (f) => `/dashboard/api/tasks/${f.taskId}`,
    missing: 'TASK_NOT_FOUND',
  },
  'POST /dashboard/api/tasks/:id/steps/:key/:action': {
    least: 'operator',
    scope: 'tenant',
    path: (f) => `/dashboard/api/tasks/${f.taskId}/steps/clean/approve`,
    body: { reason, idempotencyKey: uuid() },
    missing: 'TASK_NOT_FOUND',
  },
  'POST /dashboard/api/tasks/:id/signals/:name': {
    least: 'operator',
    scope: 'tenant',
    path: (f) => `/dashboard/api/tasks/${f.taskId}/signals/matrix`,
    body: { reason, idempotencyKey: uuid() },
    missing: 'TASK_NOT_FOUND',
  },
  'GET /dashboard/api/workflow-definitions': {
    least: 'viewer',
    scope: 'tenant',
    path: () => '/dashboard/api/workflow-definitions',
  },
  'GET /dashboard/api/schedules': {
    least: 'viewer',
    scope: 'tenant',
    path: () => '/dashboard/api/schedules',
  },
  'GET /dashboard/api/charts': { least: 'viewer', scope: 'tenant', path: () => '/dashboard/api/charts' },
  'GET /dashboard/api/audit': { least: 'viewer', scope: 'tenant', path: () => '/dashboard/api/audit' },
  // Workers and the pipeline serve every tenant: the platform's to see and to move.
  'GET /dashboard/api/queue': { least: 'viewer', scope: 'tenant', path: () => '/dashboard/api/queue' },
  'PUT /dashboard/api/queue/tenants/:tenantId/keys/:name': {
    least: 'operator',
    scope: 'tenant',
    path: (f) => `/dashboard/api/queue/tenants/${f.tenantId}/keys/matrix`,
    body: { paused: false, reason },
    missing: 'TENANT_NOT_FOUND',
  },
  'PUT /dashboard/api/queue/applications/:id/weight': {
    least: 'operator',
    scope: 'tenant',
    path: (f) => `/dashboard/api/queue/applications/${f.applicationId}/weight`,
    body: { weight: 1, reason },
    missing: 'APPLICATION_NOT_FOUND',
  },
  'PUT /dashboard/api/queue/tenants/:id/weight': {
    least: 'operator',
    scope: 'platform',
    path: (f) => `/dashboard/api/queue/tenants/${f.tenantId}/weight`,
    body: { weight: 1, reason },
  },
  'GET /dashboard/api/workers': { least: 'viewer', scope: 'platform', path: () => '/dashboard/api/workers' },
  'GET /dashboard/api/health': { least: 'viewer', scope: 'platform', path: () => '/dashboard/api/health' },
  'POST /dashboard/api/workers/:id/drain': {
    least: 'operator',
    scope: 'platform',
    path: () => `/dashboard/api/workers/${uuid()}/drain`,
    body: { reason },
  },
  'POST /dashboard/api/workers/:id/cordon': {
    least: 'operator',
    scope: 'platform',
    path: () => `/dashboard/api/workers/${uuid()}/cordon`,
    body: { reason },
  },
  'POST /dashboard/api/workers/:id/uncordon': {
    least: 'operator',
    scope: 'platform',
    path: () => `/dashboard/api/workers/${uuid()}/uncordon`,
    body: { reason },
  },
  'POST /dashboard/api/dead-letters/:table/requeue': {
    least: 'operator',
    scope: 'platform',
    path: () => '/dashboard/api/dead-letters/outbox/requeue',
    body: { reason },
  },
  ...accountRoutes('/dashboard/api'),
};

/** Operator accounts (platform-wide admins) and one's own personal tokens (anyone signed in), under a prefix. */
function accountRoutes(prefix: string): Record<string, Policy> {
  return {
    [`POST ${prefix}/operators`]: {
      least: 'admin',
      scope: 'platform',
      path: () => `${prefix}/operators`,
      body: { email: `matrix-${uuid()}@example.test`, displayName: 'matrix', roles: [] },
    },
    [`GET ${prefix}/operators`]: { least: 'admin', scope: 'platform', path: () => `${prefix}/operators` },
    [`GET ${prefix}/operators/:id`]: {
      least: 'admin',
      scope: 'platform',
      path: (f) => `${prefix}/operators/${f.operatorId}`,
    },
    [`PATCH ${prefix}/operators/:id`]: {
      least: 'admin',
      scope: 'platform',
      path: (f) => `${prefix}/operators/${f.operatorId}`,
      body: { displayName: 'matrix target' },
    },
    [`POST ${prefix}/operators/:id/sign-out`]: {
      least: 'admin',
      scope: 'platform',
      path: (f) => `${prefix}/operators/${f.operatorId}/sign-out`,
    },
    // `me`: the caller's own (another operator's tokens: see "another operator's tokens" below).
    [`POST ${prefix}/operators/:id/tokens`]: {
      least: 'viewer',
      scope: 'tenant',
      path: () => `${prefix}/operators/me/tokens`,
      body: { name: 'matrix' },
    },
    [`GET ${prefix}/operators/:id/tokens`]: {
      least: 'viewer',
      scope: 'tenant',
      path: () => `${prefix}/operators/me/tokens`,
    },
    [`DELETE ${prefix}/operators/:id/tokens/:tokenId`]: {
      least: 'viewer',
      scope: 'tenant',
      path: () => `${prefix}/operators/me/tokens/${uuid()}`,
    },
  };
}

/** Routes under the prefixes that take no operator credential: signing in and out, and the built pages. */
const ungated = new Set([
  'POST /dashboard/api/login',
  'POST /dashboard/api/logout',
  'GET /dashboard/api/sso/start',
  'GET /dashboard/api/sso/callback',
  'GET /dashboard',
  'GET /dashboard/*',
]);

const lower: Record<Role, Role | null> = { viewer: null, operator: 'viewer', admin: 'operator' };

/** An operator with both credentials: a personal token (admin API) and a dashboard session. */
interface Caller {
  label: string;
  token: string;
  session: DashboardSession;
}

let h: Harness;
let a: Fixture;
let b: Fixture;
/** Platform-wide, and bound to tenant A only, one of each role. */
let platform: Record<Role, Caller>;
let tenantA: Record<Role, Caller>;

async function caller(label: string, role: Role, tenantId: string | null): Promise<Caller> {
  const operator = await createOperator(h, [{ role, tenantId }]);
  return {
    label,
    token: operator.token,
    session: await signIn(h, { email: operator.email, password: operator.password }),
  };
}

async function fixture(ofTenant: string | null): Promise<Fixture> {
  const app = ofTenant ? await h.createApplicationIn(ofTenant) : await h.createApplication();
  expect(
    (await h.request('POST', '/v1/workflow-definitions', { token: app.apiKey, body: zipWorkflow() })).status,
  ).toBe(201);
  const task = await h.request('POST', '/v1/tasks', {
    token: app.apiKey,
    headers: { 'idempotency-key': uuid() },
    body: {
      workflowName: 'zip-clean-watermark',
      workflowVersion: '1',
      name: 'matrix task',
      input: { sourceZip: 'asset://z' },
      ownerId: 'matrix-owner',
    },
  });
  expect(task.status).toBe(201);
  const read = await h.request('GET', `/admin/v1/applications/${app.applicationId}`, { token: h.adminToken });
  // The tenant's own operator starts the job, so it reaches this tenant only.
  const own = await createOperator(h, [{ role: 'operator', tenantId: app.tenantId }]);
  const job = await h.request('POST', '/admin/v1/tasks:bulkCancel', {
    token: own.token,
    headers: { 'idempotency-key': uuid() },
    body: { filter: { workflowName: 'matrix-matches-nothing' }, reason },
  });
  expect(job.status).toBe(202);
  const target = await createOperator(h, [{ role: 'viewer', tenantId: app.tenantId }]);
  return {
    tenantId: app.tenantId,
    applicationId: app.applicationId,
    apiKeyId: read.body.apiKeys[0].id,
    taskId: task.body.task.id,
    jobId: job.body.jobId,
    operatorId: target.id,
  };
}

beforeAll(async () => {
  h = await startHarness();
  a = await fixture(null);
  b = await fixture(null);
  const roles: Role[] = ['viewer', 'operator', 'admin'];
  platform = Object.fromEntries(
    await Promise.all(roles.map(async (r) => [r, await caller(`platform ${r}`, r, null)])),
  );
  tenantA = Object.fromEntries(
    await Promise.all(roles.map(async (r) => [r, await caller(`tenant ${r}`, r, a.tenantId)])),
  );
});
afterAll(async () => {
  await h?.close();
});

/** The request as `who` makes it: a bearer token on the admin API, the session on the dashboard's. */
async function send(who: Caller | null, method: string, path: string, body?: unknown) {
  if (path.startsWith('/dashboard/')) {
    if (who) return who.session.request(method, path, body);
    const answer = await fetch(`${h.url}${path}`, {
      method,
      headers: { origin: h.url, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    return { status: answer.status, body: await answer.json().catch(() => null) };
  }
  return h.request(method, path, {
    ...(who ? { token: who.token } : {}),
    ...(body === undefined ? {} : { body }),
    ...(method === 'GET' ? {} : { headers: { 'idempotency-key': uuid() } }),
  });
}

describe('the role × route matrix', () => {
  it('declares a policy for every route under /admin/v1/ and /dashboard/api/ (and no stale one)', () => {
    const registered = routesOf(h.server.app)
      // A HEAD route is Fastify's copy of its GET, behind the same gate.
      .filter((r) => r.method !== 'HEAD' && (r.url.startsWith('/admin/') || r.url.startsWith('/dashboard')))
      .map((r) => `${r.method} ${r.url}`);
    expect(registered.length).toBeGreaterThan(50);
    expect(registered.filter((r) => !(r in policies) && !ungated.has(r))).toEqual([]);
    expect(Object.keys(policies).filter((p) => !registered.includes(p))).toEqual([]);
    expect([...ungated].filter((p) => !registered.includes(p))).toEqual([]);
  });

  for (const [route, policy] of Object.entries(policies)) {
    const method = route.split(' ')[0]!;
    const below = lower[policy.least];
    it(`${route}: ${policy.least}, ${policy.scope}`, async () => {
      const path = policy.path(a);
      const refusal = async (who: Caller | null) => {
        const answer = await send(who, method, path, policy.body);
        return [who?.label ?? 'nobody', answer.status, answer.body?.code];
      };

      expect(await refusal(null)).toEqual(['nobody', 401, 'UNAUTHENTICATED']);
      // Too low: a tenant's admin on the platform's routes; one role below the least, bound either way.
      const tooLow = [
        ...(policy.scope === 'platform' ? [tenantA.admin] : []),
        ...(below ? [platform[below], ...(policy.scope === 'tenant' ? [tenantA[below]] : [])] : []),
      ];
      for (const who of tooLow) expect(await refusal(who)).toEqual([who.label, 403, 'FORBIDDEN']);

      // Enough: the least role where the route needs it (its own tenant's resource, for a tenant's operator).
      const enough = [...(policy.scope === 'tenant' ? [tenantA[policy.least]] : []), platform[policy.least]];
      for (const who of enough) {
        const answer = await send(who, method, path, policy.body);
        expect([401, 403], `${who.label}: ${JSON.stringify(answer.body)}`).not.toContain(answer.status);
        expect(answer.status, `${who.label}: ${JSON.stringify(answer.body)}`).toBeLessThan(500);
        // Its own tenant's resource is there for it.
        if (policy.missing) expect(answer.body?.code, who.label).not.toBe(policy.missing);
      }

      // Another tenant's resource does not exist for a tenant's admin.
      if (policy.missing) {
        const answer = await send(tenantA.admin, method, policy.path(b), policy.body);
        expect([answer.status, answer.body?.code]).toEqual([404, policy.missing]);
      }
    });
  }

  it("another operator's tokens: a platform-wide admin's to manage, not a tenant's admin's", async () => {
    for (const prefix of ['/admin/v1', '/dashboard/api']) {
      const tokens = `${prefix}/operators/${a.operatorId}/tokens`;
      for (const [method, path, body] of [
        ['POST', tokens, { name: 'matrix' }],
        ['GET', tokens, undefined],
        ['DELETE', `${tokens}/${uuid()}`, undefined],
      ] as const) {
        const refused = await send(tenantA.admin, method, path, body);
        expect([method, path, refused.status, refused.body?.code]).toEqual([method, path, 403, 'FORBIDDEN']);
        const allowed = await send(platform.admin, method, path, body);
        expect([401, 403], `${method} ${path}`).not.toContain(allowed.status);
        expect(allowed.status).toBeLessThan(500);
      }
    }
  });
});

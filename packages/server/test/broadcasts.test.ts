/**
 * Broadcast scopes (docs/realtime.md) on the real server, its in-process gateway and the relay,
 * seen through the real `centrifuge` SDK: a tenant's notice reaches exactly that tenant's people, a
 * system notice everyone; only the server publishes them; bad input changes nothing. And the detail
 * channel of a task shared with a project or role, for its members.
 */
import { newId } from '@tdp/protocol';
import { Centrifuge } from 'centrifuge';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { type Harness, startHarness } from '../../../test/harness.ts';
import { connectDatabase } from '../src/main.ts';

let h: Harness;
let sql: ReturnType<typeof connectDatabase>;
type App = Awaited<ReturnType<Harness['createApplication']>>;
let tenantA: App;
let tenantA2: App;
let tenantB: App;
const clients: Centrifuge[] = [];

beforeAll(async () => {
  h = await startHarness({ runLoops: true });
  sql = connectDatabase({ url: h.databaseUrl, maxConnections: 1 });
  tenantA = await h.createApplication();
  tenantA2 = await h.createApplicationIn(tenantA.tenantId, 'second');
  tenantB = await h.createApplication();
});
afterAll(async () => {
  for (const client of clients) client.disconnect();
  await sql.end();
  await h.close();
});

/** A person's connection with the token their application's backend got; what it heard, by channel. */
async function connect(app: App, userId: string, extra: Record<string, unknown> = {}) {
  const issued = await h.request('POST', '/v1/realtime/connection-token', {
    token: app.apiKey,
    body: { userId, ...extra },
  });
  expect(issued.status).toBe(200);
  const client = new Centrifuge(issued.body.url, { websocket: WebSocket, token: issued.body.token });
  clients.push(client);
  const heard: { channel: string; data: Record<string, unknown> }[] = [];
  client.on('publication', (ctx) => heard.push({ channel: ctx.channel, data: ctx.data }));
  const connected = new Promise((resolve) => client.once('connected', resolve));
  client.connect();
  await connected;
  return { client, heard, channels: issued.body.channels as string[] };
}

const notice = { title: 'Maintenance', message: 'Read-only from 22:00 UTC', severity: 'WARNING' };
const broadcastRows = async () =>
  Number((await sql`SELECT count(*) AS n FROM realtime_message WHERE aggregate_type = 'BROADCAST'`)[0]!.n);

describe('broadcasts', () => {
  it("a tenant's notice reaches its people in every application, not another tenant's; a system notice reaches all", async () => {
    const a1 = await connect(tenantA, 'alice');
    const a2 = await connect(tenantA2, 'anna');
    const b = await connect(tenantB, 'bob');
    expect(a1.channels).toEqual([
      `task_user:${tenantA.tenantId}/${tenantA.applicationId}/alice`,
      `task_tenant:${tenantA.tenantId}`,
      'task_system:public',
    ]);

    const sent = await h.request('POST', '/v1/broadcasts', {
      token: tenantA.apiKey,
      body: { ...notice, link: 'https://status.example.com/maintenance' },
    });
    expect(sent.status).toBe(202);
    expect(sent.body.channel).toBe(`task_tenant:${tenantA.tenantId}`);
    const byOperator = await h.request('POST', `/admin/v1/tenants/${tenantB.tenantId}/broadcasts`, {
      token: h.adminToken,
      body: { title: 'Hello B', message: 'For tenant B only', severity: 'INFO' },
    });
    expect(byOperator.status).toBe(202);
    const system = await h.request('POST', '/admin/v1/broadcasts', {
      token: h.adminToken,
      body: { message: 'TDP 2.0 is out', severity: 'INFO' },
    });
    expect(system.status).toBe(202);

    const ids = (heard: { data: Record<string, unknown> }[]) => heard.map((m) => m.data.id).sort();
    const everyone = [a1, a2, b];
    await expect
      .poll(() => everyone.every((c) => c.heard.some((m) => m.data.id === system.body.id)))
      .toBe(true);
    await expect.poll(() => ids(a1.heard)).toEqual([sent.body.id, system.body.id].sort());
    await expect.poll(() => ids(a2.heard)).toEqual([sent.body.id, system.body.id].sort());
    await expect.poll(() => ids(b.heard)).toEqual([byOperator.body.id, system.body.id].sort());
    expect(a1.heard.find((m) => m.data.id === sent.body.id)?.data).toEqual({
      kind: 'broadcast',
      scope: 'TENANT',
      id: sent.body.id,
      ...notice,
      link: 'https://status.example.com/maintenance',
      sentAt: sent.body.sentAt,
    });
    expect(b.heard.find((m) => m.data.id === system.body.id)).toEqual({
      channel: 'task_system:public',
      data: {
        kind: 'broadcast',
        scope: 'SYSTEM',
        id: system.body.id,
        message: 'TDP 2.0 is out',
        severity: 'INFO',
        sentAt: system.body.sentAt,
      },
    });

    const audit = await h.request(
      'GET',
      `/admin/v1/audit?subjectId=${tenantA.tenantId}&action=BROADCAST_TENANT`,
      {
        token: h.adminToken,
      },
    );
    expect(audit.body.items).toMatchObject([
      {
        action: 'BROADCAST_TENANT',
        actor: `application:${tenantA.applicationId}`,
        reason: notice.message,
        details: { broadcastId: sent.body.id },
      },
    ]);
    const systemAudit = await h.request('GET', '/admin/v1/audit?subjectId=system', { token: h.adminToken });
    expect(systemAudit.body.items).toMatchObject([
      { action: 'BROADCAST_SYSTEM', actor: 'bootstrap admin token', operatorId: null, tenantId: null },
    ]);
  });

  it("a person of another tenant cannot follow the tenant's channel, nor publish to a broadcast channel", async () => {
    const b = await connect(tenantB, 'mallory');
    const foreign = b.client.newSubscription(`task_tenant:${tenantA.tenantId}`);
    const refused = new Promise<number>((resolve) =>
      foreign.once('unsubscribed', (ctx) => resolve(ctx.code)),
    );
    foreign.subscribe();
    expect(await refused).toBe(103);
    await expect(
      b.client.publish(`task_tenant:${tenantB.tenantId}`, { kind: 'broadcast' }),
    ).rejects.toMatchObject({
      code: 103,
    });
    // A subscription token is only ever for a task's detail channel.
    const token = await h.request('POST', '/v1/realtime/subscription-token', {
      token: tenantB.apiKey,
      body: { userId: 'mallory', taskId: newId() },
    });
    expect(token.status).toBe(404);
  });

  it('refuses bad input with problem+json and a stable code, and publishes nothing', async () => {
    const before = await broadcastRows();
    const bad: [string, string, string | undefined, unknown, number, string][] = [
      [
        'tenant notice without a title',
        '/v1/broadcasts',
        tenantA.apiKey,
        { message: 'x', severity: 'INFO' },
        400,
        'VALIDATION_FAILED',
      ],
      [
        'an unknown severity',
        '/v1/broadcasts',
        tenantA.apiKey,
        { ...notice, severity: 'LOUD' },
        400,
        'VALIDATION_FAILED',
      ],
      [
        'a link that is not http(s)',
        '/v1/broadcasts',
        tenantA.apiKey,
        { ...notice, link: 'javascript:alert(1)' },
        400,
        'VALIDATION_FAILED',
      ],
      [
        'task details smuggled in',
        '/v1/broadcasts',
        tenantA.apiKey,
        { ...notice, taskId: newId() },
        400,
        'VALIDATION_FAILED',
      ],
      [
        'a system notice with a title',
        '/admin/v1/broadcasts',
        h.adminToken,
        { ...notice },
        400,
        'VALIDATION_FAILED',
      ],
      [
        'a system notice too long',
        '/admin/v1/broadcasts',
        h.adminToken,
        { message: 'x'.repeat(281), severity: 'INFO' },
        400,
        'VALIDATION_FAILED',
      ],
      [
        'a system notice by an application',
        '/admin/v1/broadcasts',
        tenantA.apiKey,
        { message: 'hi', severity: 'INFO' },
        401,
        'UNAUTHENTICATED',
      ],
      [
        "another tenant's notice by an application",
        `/admin/v1/tenants/${tenantB.tenantId}/broadcasts`,
        tenantA.apiKey,
        notice,
        401,
        'UNAUTHENTICATED',
      ],
      [
        'an unknown tenant',
        `/admin/v1/tenants/${newId()}/broadcasts`,
        h.adminToken,
        notice,
        404,
        'TENANT_NOT_FOUND',
      ],
      ['no key at all', '/v1/broadcasts', undefined, notice, 401, 'UNAUTHENTICATED'],
    ];
    bad.push([
      'a NUL character',
      '/v1/broadcasts',
      tenantA.apiKey,
      { ...notice, message: 'a\u0000b' },
      400,
      'VALIDATION_FAILED',
    ]);
    for (const [what, path, token, body, status, code] of bad) {
      const answer = await h.request('POST', path, { ...(token ? { token } : {}), body });
      expect({ what, status: answer.status, code: answer.body.code }).toEqual({ what, status, code });
      expect(answer.headers.get('content-type')).toContain('application/problem+json');
    }
    expect(await broadcastRows()).toBe(before);
  });

  it('with an Idempotency-Key: a retry answers the first answer and publishes once; another body is 409', async () => {
    const listener = await connect(tenantB, 'bea');
    const systemRows = async () =>
      Number(
        (await sql`SELECT count(*) AS n FROM realtime_message WHERE channel = 'task_system:public'`)[0]!.n,
      );
    const cases: [string, string, Record<string, unknown>, Record<string, unknown>][] = [
      ['/v1/broadcasts', tenantB.apiKey, { ...notice, title: 'Once' }, { ...notice, title: 'Twice' }],
      [
        `/admin/v1/tenants/${tenantB.tenantId}/broadcasts`,
        h.adminToken,
        { ...notice, title: 'Once by the operator' },
        { ...notice, title: 'Other' },
      ],
      [
        '/admin/v1/broadcasts',
        h.adminToken,
        { message: 'Once to all', severity: 'INFO' },
        { message: 'x', severity: 'INFO' },
      ],
    ];
    const firstIds: string[] = [];
    for (const [path, token, body, otherBody] of cases) {
      const key = `key-${newId()}`;
      const headers = { 'idempotency-key': key };
      const before = await broadcastRows();
      const first = await h.request('POST', path, { token, body, headers });
      expect(first.status).toBe(202);
      expect(first.headers.get('idempotent-replayed')).toBeNull();
      const again = await h.request('POST', path, { token, body, headers });
      expect({ path, status: again.status, body: again.body }).toEqual({
        path,
        status: 202,
        body: first.body,
      });
      expect(again.headers.get('idempotent-replayed')).toBe('true');
      const reused = await h.request('POST', path, { token, body: otherBody, headers });
      expect({ path, status: reused.status, code: reused.body.code }).toEqual({
        path,
        status: 409,
        code: 'IDEMPOTENCY_KEY_REUSED',
      });
      expect(reused.headers.get('content-type')).toContain('application/problem+json');
      expect(await broadcastRows()).toBe(before + 1);
      firstIds.push(first.body.id);
    }
    // The operator's key for one tenant is another request for another tenant.
    const key = `key-${newId()}`;
    const forB = await h.request('POST', `/admin/v1/tenants/${tenantB.tenantId}/broadcasts`, {
      token: h.adminToken,
      body: notice,
      headers: { 'idempotency-key': key },
    });
    expect(forB.status).toBe(202);
    const forA = await h.request('POST', `/admin/v1/tenants/${tenantA.tenantId}/broadcasts`, {
      token: h.adminToken,
      body: notice,
      headers: { 'idempotency-key': key },
    });
    expect(forA.body.code).toBe('IDEMPOTENCY_KEY_REUSED');
    // Another application's key space is its own.
    const systemBefore = await systemRows();
    const mine = await h.request('POST', '/v1/broadcasts', {
      token: tenantA.apiKey,
      body: { ...notice, title: 'Once' },
      headers: { 'idempotency-key': 'shared-key' },
    });
    const theirs = await h.request('POST', '/v1/broadcasts', {
      token: tenantB.apiKey,
      body: { ...notice, title: 'Once' },
      headers: { 'idempotency-key': 'shared-key' },
    });
    expect([mine.status, theirs.status]).toEqual([202, 202]);
    expect(mine.body.id).not.toBe(theirs.body.id);
    expect(await systemRows()).toBe(systemBefore);
    // The listener heard each first broadcast exactly once (the last one sent after them all).
    await expect.poll(() => listener.heard.some((m) => m.data.id === theirs.body.id)).toBe(true);
    for (const id of firstIds) expect(listener.heard.filter((m) => m.data.id === id)).toHaveLength(1);
    expect(listener.heard.filter((m) => m.data.title === 'Twice' || m.data.title === 'Other')).toEqual([]);
  });
});

describe("project and role members follow a shared task's detail", () => {
  it('a project member gets a detail token for a task shared with the project, and sees its changes; others get 404', async () => {
    await h.request('POST', '/v1/workflow-definitions', {
      token: tenantA.apiKey,
      body: {
        name: 'shared',
        version: '1',
        steps: [{ key: 'only', capability: 'nobody.shared', capabilityVersion: '1' }],
      },
    });
    const created = await h.request('POST', '/v1/tasks', {
      token: tenantA.apiKey,
      headers: { 'idempotency-key': newId() },
      body: { workflowName: 'shared', workflowVersion: '1', name: 'shared task', ownerId: 'owner' },
    });
    const taskId = created.body.task.id as string;
    for (const [principalType, principalId] of [
      ['PROJECT', 'p9'],
      ['ROLE', 'reviewer:eu'],
    ])
      expect(
        (
          await h.request('POST', `/v1/tasks/${taskId}/acl`, {
            token: tenantA.apiKey,
            body: { principalType, principalId },
          })
        ).status,
      ).toBe(204);
    const detailToken = (body: Record<string, unknown>, apiKey = tenantA.apiKey) =>
      h.request('POST', '/v1/realtime/subscription-token', { token: apiKey, body: { taskId, ...body } });

    const member = await detailToken({ userId: 'pat', projects: ['p9'] });
    expect(member.status).toBe(200);
    expect(member.body.channel).toBe(`task_detail:${tenantA.tenantId}/${taskId}`);
    expect((await detailToken({ userId: 'rita', roles: ['reviewer:eu'] })).status).toBe(200);
    for (const outsider of [
      { userId: 'pat' },
      { userId: 'pat', projects: ['p8'] },
      { userId: 'rita', roles: ['author'] },
    ]) {
      const refused = await detailToken(outsider);
      expect(refused.status).toBe(404);
      expect(refused.body.code).toBe('TASK_NOT_FOUND');
    }
    // The project is the application's: another tenant's backend naming it gets nothing.
    expect((await detailToken({ userId: 'pat', projects: ['p9'] }, tenantB.apiKey)).status).toBe(404);

    // The member's connection carries the project's summary channel, and the detail token subscribes.
    const pat = await connect(tenantA, 'pat', { projects: ['p9'] });
    expect(pat.channels).toContain(`task_project:${tenantA.tenantId}/${tenantA.applicationId}/p9`);
    const detail = pat.client.newSubscription(member.body.channel, { token: member.body.token });
    const details: { state: { lifecycleStatus: string } }[] = [];
    detail.on('publication', (ctx) => details.push(ctx.data));
    const subscribed = new Promise((resolve) => detail.once('subscribed', resolve));
    detail.subscribe();
    await subscribed;
    await h.request('POST', `/v1/tasks/${taskId}:cancel`, { token: tenantA.apiKey });
    await expect.poll(() => details.at(-1)?.state.lifecycleStatus, { timeout: 10_000 }).toBe('CANCELLED');
    await expect
      .poll(() =>
        pat.heard.some(
          (m) =>
            m.channel.startsWith('task_project:') &&
            m.data.taskId === taskId &&
            m.data.lifecycleStatus === 'CANCELLED',
        ),
      )
      .toBe(true);
  });
});

import argon2 from 'argon2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Harness, startHarness } from '../../../test/harness.ts';
import { createOperator, signIn } from '../../../test/operators.ts';
import { connectDatabase } from '../src/main.ts';

let h: Harness;
let sql: ReturnType<typeof connectDatabase>;

beforeAll(async () => {
  h = await startHarness();
  sql = connectDatabase({ url: h.databaseUrl, maxConnections: 1 });
});
afterAll(async () => {
  await sql.end();
  await h.close();
});

const login = (body: unknown) =>
  fetch(`${h.url}/dashboard/api/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', origin: h.url },
    body: JSON.stringify(body),
  });

describe('operator accounts', () => {
  it('keeps the password as an argon2id hash, never as given', async () => {
    const op = await createOperator(h, [{ role: 'viewer' }]);
    const [row] = await sql<
      { password_hash: string }[]
    >`SELECT password_hash FROM operator WHERE id = ${op.id}`;
    expect(row!.password_hash).toMatch(/^\$argon2id\$/);
    expect(row!.password_hash).not.toContain(op.password);
    expect(await argon2.verify(row!.password_hash, op.password)).toBe(true);
    const [token] = await sql<
      { secret_hash: Buffer }[]
    >`SELECT secret_hash FROM operator_token WHERE operator_id = ${op.id}`;
    expect(token!.secret_hash.toString('utf8')).not.toContain(op.token.split('_')[2]);
  });

  it('signs in with email and password; a wrong password, an unknown address and a disabled account are refused alike', async () => {
    const op = await createOperator(h, [{ role: 'viewer' }]);
    const session = await signIn(h, { email: op.email.toUpperCase(), password: op.password });
    const me = await session.request('GET', '/dashboard/api/me');
    expect(me.body.operator).toEqual({ id: op.id, displayName: expect.any(String), email: op.email });
    expect(me.body.can).toEqual({ act: false, actOnPlatform: false, admin: false, seePlatform: true });

    const wrong = await login({ email: op.email, password: `${op.password}x` });
    const unknown = await login({ email: 'nobody@example.test', password: op.password });
    await h.request('PATCH', `/admin/v1/operators/${op.id}`, {
      token: h.adminToken,
      body: { status: 'DISABLED' },
    });
    const disabled = await login({ email: op.email, password: op.password });
    for (const answer of [wrong, unknown, disabled]) {
      const body = (await answer.json()) as { code: string; detail: string };
      expect([answer.status, body.code]).toEqual([401, 'UNAUTHENTICATED']);
      expect(body.detail).toBe('that email and password do not match an active operator');
      expect(answer.headers.get('set-cookie')).toBeNull();
    }
  });

  it('refuses a second account with the same email, a short password and a role for a tenant that does not exist', async () => {
    const op = await createOperator(h, [{ role: 'viewer' }]);
    const again = await h.request('POST', '/admin/v1/operators', {
      token: h.adminToken,
      body: { email: op.email, displayName: 'Twin', roles: [] },
    });
    expect([again.status, again.body.code]).toEqual([409, 'OPERATOR_EMAIL_TAKEN']);
    const short = await h.request('POST', '/admin/v1/operators', {
      token: h.adminToken,
      body: { email: 'short@example.test', displayName: 'Short', password: 'short', roles: [] },
    });
    expect([short.status, short.body.code]).toEqual([400, 'VALIDATION_FAILED']);
    const ghost = await h.request('POST', '/admin/v1/operators', {
      token: h.adminToken,
      body: {
        email: 'ghost@example.test',
        displayName: 'Ghost',
        roles: [{ role: 'admin', tenantId: '00000000-0000-4000-8000-000000000000' }],
      },
    });
    expect([ghost.status, ghost.body.code]).toEqual([404, 'TENANT_NOT_FOUND']);
    const [{ n }] =
      (await sql`SELECT count(*)::int AS n FROM operator WHERE email IN ('short@example.test', 'ghost@example.test')`) as unknown as [
        { n: number },
      ];
    expect(n).toBe(0);
  });

  it("a token does no more than its role, nor more than its operator's", async () => {
    const admin = await createOperator(h, [{ role: 'admin' }]);
    const viewerToken = await h.request('POST', '/admin/v1/operators/me/tokens', {
      token: admin.token,
      body: { name: 'read only', role: 'viewer', expiresInDays: 1 },
    });
    expect(viewerToken.status).toBe(201);
    expect((await h.request('GET', '/admin/v1/tenants', { token: viewerToken.body.token })).status).toBe(200);
    const refused = await h.request('POST', '/admin/v1/tenants', {
      token: viewerToken.body.token,
      body: { name: 'from-a-viewer-token' },
    });
    expect([refused.status, refused.body.code]).toEqual([403, 'FORBIDDEN']);

    const viewer = await createOperator(h, [{ role: 'viewer' }]);
    const tooMuch = await h.request('POST', '/admin/v1/operators/me/tokens', {
      token: viewer.token,
      body: { name: 'escalate', role: 'admin' },
    });
    expect([tooMuch.status, tooMuch.body.code]).toEqual([403, 'FORBIDDEN']);
    // Another operator's tokens are a platform admin's business.
    const others = await h.request('GET', `/admin/v1/operators/${admin.id}/tokens`, { token: viewer.token });
    expect(others.status).toBe(403);
  });

  it('a revoked or expired token opens nothing, at once', async () => {
    const op = await createOperator(h, [{ role: 'viewer' }]);
    const me = await h.request('GET', '/admin/v1/me', { token: op.token });
    expect(me.body.credential.kind).toBe('token');
    const tokenId = me.body.credential.id as string;
    const revoked = await h.request('DELETE', `/admin/v1/operators/me/tokens/${tokenId}`, {
      token: op.token,
    });
    expect(revoked.status).toBe(204);
    expect((await h.request('GET', '/admin/v1/me', { token: op.token })).status).toBe(401);

    const other = await createOperator(h, [{ role: 'viewer' }]);
    expect((await h.request('GET', '/admin/v1/me', { token: other.token })).status).toBe(200);
    // The server's clock passes the token's expiry (90 days by default).
    h.clock.advance(91 * 86_400_000);
    expect((await h.request('GET', '/admin/v1/me', { token: other.token })).status).toBe(401);
  });

  it('an admin cannot disable their own account', async () => {
    const admin = await createOperator(h, [{ role: 'admin' }]);
    const self = await h.request('PATCH', `/admin/v1/operators/${admin.id}`, {
      token: admin.token,
      body: { status: 'DISABLED' },
    });
    expect([self.status, self.body.code]).toEqual([400, 'VALIDATION_FAILED']);
    expect((await h.request('GET', '/admin/v1/me', { token: admin.token })).status).toBe(200);
  });
});

describe('the bootstrap admin token switched off', () => {
  it('opens nothing: not the admin API, not the dashboard, not a session it opened before', async () => {
    const on = await startHarness();
    const op = await createOperator(on, [{ role: 'admin' }]);
    const bootstrapSession = await signIn(on, { token: on.adminToken });
    expect((await bootstrapSession.request('GET', '/dashboard/api/me')).status).toBe(200);
    // A replica on the same database with the bootstrap token off.
    const off = await startHarness({
      sharedDatabaseUrl: on.databaseUrl,
      settings: { adminTokenEnabled: false },
    });
    try {
      expect((await off.request('GET', '/admin/v1/tenants', { token: on.adminToken })).status).toBe(401);
      const page = await fetch(`${off.url}/dashboard/api/login`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', origin: off.url },
        body: JSON.stringify({ token: on.adminToken }),
      });
      expect(page.status).toBe(401);
      const oldSession = await fetch(`${off.url}/dashboard/api/me`, {
        headers: { cookie: bootstrapSession.cookie },
      });
      expect(oldSession.status).toBe(401);
      // A named admin still works.
      expect((await off.request('GET', '/admin/v1/tenants', { token: op.token })).status).toBe(200);
    } finally {
      await off.close();
      await on.close();
    }
  });
});

describe('an operator probing past their roles', () => {
  it('is counted as a failed authentication: a role too low and another tenant’s resource close the address', async () => {
    const strict = await startHarness({ settings: { authFailureLimit: 3, authFailureWindowSeconds: 60 } });
    try {
      const mine = await strict.createApplication();
      const theirs = await strict.createApplication();
      const viewer = await createOperator(strict, [{ role: 'viewer', tenantId: mine.tenantId }]);
      const as = (method: string, path: string, body?: unknown) =>
        strict.request(method, path, { token: viewer.token, ...(body ? { body } : {}) });
      // Reading their own tenant is no failure, however often.
      for (let i = 0; i < 4; i += 1)
        expect((await as('GET', `/admin/v1/applications/${mine.applicationId}`)).status).toBe(200);
      // A change their role does not allow (403), twice; another tenant's application (404, as if none).
      const tooLow = await as('POST', `/admin/v1/applications/${mine.applicationId}/api-keys`, {});
      expect([tooLow.status, tooLow.body.code]).toEqual([403, 'FORBIDDEN']);
      expect((await as('POST', `/admin/v1/applications/${mine.applicationId}/api-keys`, {})).status).toBe(
        403,
      );
      const other = await as('GET', `/admin/v1/applications/${theirs.applicationId}`);
      expect([other.status, other.body.code]).toEqual([404, 'APPLICATION_NOT_FOUND']);
      // The third refusal closed the address, to the operator's allowed reads too.
      const closed = await as('GET', `/admin/v1/applications/${mine.applicationId}`);
      expect([closed.status, closed.body.code]).toEqual([429, 'AUTH_THROTTLED']);
    } finally {
      await strict.close();
    }
  });
});

describe('an account without a role', () => {
  it('signs in to nothing: the right password is told that the account has no role yet', async () => {
    const op = { email: 'no-role@example.test', password: 'a long enough password' };
    const created = await h.request('POST', '/admin/v1/operators', {
      token: h.adminToken,
      body: { ...op, displayName: 'No Role', roles: [] },
    });
    expect(created.status).toBe(201);
    const answer = await login(op);
    expect(answer.status).toBe(403);
    expect(((await answer.json()) as { code: string }).code).toBe('FORBIDDEN');
    expect(answer.headers.get('set-cookie')).toBeNull();
  });
});

describe('tokens made with a token', () => {
  it('do no more than the token that asks for them, and end no later', async () => {
    const admin = await createOperator(h, [{ role: 'admin' }]);
    const narrow = await h.request('POST', '/admin/v1/operators/me/tokens', {
      token: admin.token,
      body: { name: 'read only', role: 'viewer', expiresInDays: 1 },
    });
    // A leaked viewer token cannot mint itself an admin token, however high its operator.
    const escalate = await h.request('POST', '/admin/v1/operators/me/tokens', {
      token: narrow.body.token,
      body: { name: 'escalate', role: 'admin' },
    });
    expect([escalate.status, escalate.body.code]).toEqual([403, 'FORBIDDEN']);
    const child = await h.request('POST', '/admin/v1/operators/me/tokens', {
      token: narrow.body.token,
      body: { name: 'longer', expiresInDays: 365 },
    });
    expect(child.status).toBe(201);
    expect(child.body.role).toBe('viewer');
    expect(child.body.expiresAt).toBe(narrow.body.expiresAt);
  });
});

describe('single sign-on and existing accounts', () => {
  it('links an account by its email only when the provider says the email is verified', async () => {
    const { PostgresOperatorAccountStore } = await import(
      '../src/adapters/outbound/postgres/operatorAccountStore.ts'
    );
    const { PostgresOperatorSessionStore } = await import(
      '../src/adapters/outbound/postgres/operatorSessionStore.ts'
    );
    const { Argon2Passwords } = await import('../src/adapters/outbound/passwords/argon2Passwords.ts');
    const { signInWithSso } = await import('../src/core/identity/operatorSignIn.ts');
    const { newId } = await import('@tdp/protocol');
    const announced: { kind: string }[] = [];
    const operators = {
      store: new PostgresOperatorAccountStore(sql),
      passwords: new Argon2Passwords(),
      clock: h.clock,
      ids: { newId },
      tenantExists: async () => true,
      revocations: { announce: async (r: { kind: string }) => void announced.push(r) },
    };
    const deps = {
      operators,
      sessions: {
        store: new PostgresOperatorSessionStore(sql),
        clock: h.clock,
        ids: { newId },
        bootstrapEnabled: true,
        policy: { idleTimeoutSeconds: 600, lifetimeSeconds: 3600 },
        csrfKey: new Uint8Array(32),
      },
    };
    const admin = await createOperator(h, [{ role: 'admin' }]);
    const person = (emailVerified: boolean) => ({
      issuer: 'https://idp.example.test',
      subject: `sub-${emailVerified}`,
      email: admin.email,
      emailVerified,
      name: 'Mallory',
      groups: [],
    });
    // An unverified claim of the admin's address opens nothing and links nothing.
    await expect(
      signInWithSso(deps, person(false), [{ role: 'viewer', tenantId: null }]),
    ).rejects.toMatchObject({
      code: 'SSO_REJECTED',
    });
    const [unlinked] = await sql`SELECT sso_subject FROM operator WHERE id = ${admin.id}`;
    expect(unlinked!.sso_subject).toBeNull();
    // A verified one links the account, which keeps the roles an admin gave it.
    const session = await signInWithSso(deps, person(true), []);
    expect(session.id).toMatch(/^[A-Za-z0-9_-]{43}$/);
    const [linked] = await sql`SELECT sso_subject FROM operator WHERE id = ${admin.id}`;
    expect(linked!.sso_subject).toBe('https://idp.example.test sub-true');
    // The same roles from the groups again end nothing; other ones end the live feeds opened before.
    expect(announced).toEqual([]);
    await signInWithSso(deps, person(true), []);
    expect(announced).toEqual([]);
    await signInWithSso(deps, person(true), [{ role: 'viewer', tenantId: null }]);
    expect(announced).toEqual([{ kind: 'operator', operatorId: admin.id }]);
  });
});

describe("the admin API's identity changes", () => {
  it('are audited in their own transaction with the operator who made them; a repeated version writes nothing', async () => {
    const admin = await createOperator(h, [{ role: 'admin' }]);
    const app = await h.createApplication();
    const define = () =>
      h.request('POST', `/admin/v1/applications/${app.applicationId}/status-definitions`, {
        token: admin.token,
        body: {
          taskType: 'ZIP',
          version: 1,
          statuses: [{ code: 'FIXED_BY_HAND', displayName: 'Fixed by hand', lifecycleStatus: 'SUCCEEDED' }],
        },
      });
    expect((await define()).status).toBe(201);
    expect((await define()).status).toBe(200);
    const rotated = await h.request('POST', `/admin/v1/applications/${app.applicationId}/api-keys`, {
      token: admin.token,
      body: {},
    });
    expect(rotated.status).toBe(201);
    const view = await h.request('PUT', `/admin/v1/tenants/${app.tenantId}/user-view`, {
      token: admin.token,
      body: { tenantWideApplicationIds: [app.applicationId] },
    });
    expect(view.status).toBe(200);
    const [viewAudit] = await sql`
      SELECT operator_id, before, after FROM operator_audit WHERE action = 'USER_VIEW_SET' AND tenant_id = ${app.tenantId}`;
    expect(viewAudit).toEqual({
      operator_id: admin.id,
      before: { tenantWideApplicationIds: [] },
      after: { tenantWideApplicationIds: [app.applicationId] },
    });
    const rows = await sql<{ action: string; operator_id: string; tenant_id: string; details: unknown }[]>`
      SELECT action, operator_id, tenant_id, details FROM operator_audit
      WHERE subject_id = ${app.applicationId} AND operator_id = ${admin.id} ORDER BY action`;
    expect(rows).toEqual([
      {
        action: 'API_KEY_ROTATED',
        operator_id: admin.id,
        tenant_id: app.tenantId,
        details: { keyId: rotated.body.apiKey.id, previousKeysExpireAt: rotated.body.previousKeysExpireAt },
      },
      {
        action: 'STATUS_DEFINITION_ADDED',
        operator_id: admin.id,
        tenant_id: app.tenantId,
        details: { taskType: 'ZIP', version: 1 },
      },
    ]);
  });
});

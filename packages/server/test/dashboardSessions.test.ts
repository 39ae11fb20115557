/**
 * The dashboard's sessions and what browsers get from the server (issue 38, item 5): sessions kept on
 * the server (logout and the idle timeout end them, and so does their absolute lifetime), `Secure`
 * cookies only when a trusted proxy says the request came over TLS, CSRF refusals for a change from
 * another site or without the session's token, and the security headers on every kind of answer.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Harness, startHarness } from '../../../test/harness.ts';
import { parseTrustProxy } from '../src/host/trustProxy.ts';

let h: Harness;
const idleSeconds = 600;
const lifetimeSeconds = 1800;

beforeAll(async () => {
  h = await startHarness({
    settings: { dashboardSessionIdleSeconds: idleSeconds, dashboardSessionLifetimeSeconds: lifetimeSeconds },
  });
});
afterAll(async () => {
  await h?.close();
});

interface Session {
  cookie: string;
  csrfToken: string;
  setCookie: string;
}

async function login(harness = h, headers: Record<string, string> = {}): Promise<Session> {
  const response = await fetch(`${harness.url}/dashboard/api/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ token: harness.adminToken }),
  });
  expect(response.status).toBe(200);
  const setCookie = response.headers.get('set-cookie')!;
  const body = (await response.json()) as { csrfToken: string };
  return { cookie: setCookie.split(';')[0]!, csrfToken: body.csrfToken, setCookie };
}

const me = (session: Session, harness = h) =>
  fetch(`${harness.url}/dashboard/api/me`, { headers: { cookie: session.cookie } });

/** An operator action that changes state and needs nothing set up: requeue the outbox's dead letters. */
const requeue = (session: Session, headers: Record<string, string>, body = '{"reason":"test"}') =>
  fetch(`${h.url}/dashboard/api/dead-letters/outbox/requeue`, {
    method: 'POST',
    headers: { cookie: session.cookie, 'content-type': 'application/json', ...headers },
    body,
  });

const problemOf = async (response: Response) => ({
  status: response.status,
  type: response.headers.get('content-type'),
  code: ((await response.json()) as { code?: string }).code,
});

describe('dashboard sessions, kept on the server', () => {
  it('logout ends the session: the old cookie is refused afterwards', async () => {
    const session = await login();
    expect((await me(session)).status).toBe(200);
    const logout = await fetch(`${h.url}/dashboard/api/logout`, {
      method: 'POST',
      headers: { cookie: session.cookie, 'x-csrf-token': session.csrfToken },
    });
    expect(logout.status).toBe(200);
    expect(logout.headers.get('set-cookie')).toMatch(/^tdp_operator=; .*Max-Age=0/);
    // A copy of the cookie kept elsewhere is dead too.
    expect(await problemOf(await me(session))).toEqual({
      status: 401,
      type: expect.stringContaining('application/problem+json'),
      code: 'UNAUTHENTICATED',
    });
    // Another session goes on.
    expect((await me(await login())).status).toBe(200);
  });

  it('a session unused for the idle timeout ends; one in use goes on until its lifetime', async () => {
    const idle = await login();
    const busy = await login();
    h.clock.advance((idleSeconds - 60) * 1000);
    expect((await me(busy)).status).toBe(200);
    h.clock.advance(120_000);
    expect((await me(idle)).status).toBe(401);
    expect((await me(busy)).status).toBe(200);
    // Used every few minutes, it still ends at its absolute lifetime, and not before.
    let usedFor = (idleSeconds + 60) * 1000;
    while (usedFor + (idleSeconds / 2) * 1000 < lifetimeSeconds * 1000) {
      h.clock.advance((idleSeconds / 2) * 1000);
      usedFor += (idleSeconds / 2) * 1000;
      expect((await me(busy)).status).toBe(200);
    }
    h.clock.advance((idleSeconds / 2) * 1000);
    expect((await me(busy)).status).toBe(401);
    expect((await me(idle)).status).toBe(401);
  });

  it('the page learns its CSRF token from /me, and the cookie holds no token of any kind', async () => {
    const session = await login();
    const answer = (await (await me(session)).json()) as { csrfToken: string; operator: unknown };
    expect(answer.csrfToken).toBe(session.csrfToken);
    expect(answer.operator).toEqual({ id: null, displayName: 'bootstrap admin token', email: null });
    // An opaque random id (no JWT, nothing readable).
    expect(session.cookie).toMatch(/^tdp_operator=[A-Za-z0-9_-]{43}$/);
  });
});

describe('cookies over TLS', () => {
  it('are Secure and __Host- when a trusted proxy says https, and not when an untrusted one says it', async () => {
    const proxied = await startHarness({
      sharedDatabaseUrl: h.databaseUrl,
      settings: { trustProxy: '127.0.0.1' },
    });
    const untrusted = await startHarness({
      sharedDatabaseUrl: h.databaseUrl,
      settings: { trustProxy: '10.0.0.0/8' },
    });
    try {
      const tls = await login(proxied, { 'x-forwarded-proto': 'https' });
      expect(tls.setCookie).toMatch(/^__Host-tdp_operator=[^;]+; Path=\/; Secure; HttpOnly; SameSite=Strict/);
      expect((await me(tls, proxied)).status).toBe(200);
      // Plain http through the same proxy: no Secure, and the cookie stays under /dashboard.
      const plain = await login(proxied);
      expect(plain.setCookie).toMatch(/^tdp_operator=[^;]+; Path=\/dashboard; HttpOnly; SameSite=Strict/);
      expect(plain.setCookie).not.toMatch(/Secure/i);
      // The header from a peer nobody trusts counts for nothing (here: and by default).
      for (const harness of [untrusted, h]) {
        const claimed = await login(harness, { 'x-forwarded-proto': 'https' });
        expect(claimed.setCookie).toMatch(/^tdp_operator=/);
        expect(claimed.setCookie).not.toMatch(/Secure/i);
      }
    } finally {
      await proxied.close();
      await untrusted.close();
    }
  });
});

describe('TDP_TRUST_PROXY', () => {
  it('takes addresses, CIDRs, named ranges or a hop count, and refuses anything else', () => {
    expect(parseTrustProxy(undefined)).toBeUndefined();
    expect(parseTrustProxy(' ')).toBeUndefined();
    expect(parseTrustProxy('10.0.0.1, 192.168.0.0/16,loopback, ::1, fd00::/8')).toBe(
      '10.0.0.1,192.168.0.0/16,loopback,::1,fd00::/8',
    );
    expect(parseTrustProxy('2')).toBe(2);
    expect(parseTrustProxy('0')).toBe(false);
    for (const wrong of ['true', '*', '10.0.0.0/33', 'proxy.example', '10.0.0.1/8/1'])
      expect(() => parseTrustProxy(wrong), wrong).toThrow(/TDP_TRUST_PROXY/);
  });
});

describe('CSRF on the dashboard', () => {
  it('refuses a change from another origin, a cross-site fetch and one without the token', async () => {
    const session = await login();
    const refusals: Record<string, string>[] = [
      // Another site's page, its fetch carrying the operator's cookie (and even the token).
      { origin: 'https://evil.example', 'x-csrf-token': session.csrfToken },
      { 'sec-fetch-site': 'cross-site', 'x-csrf-token': session.csrfToken },
      { 'sec-fetch-site': 'same-site', 'x-csrf-token': session.csrfToken },
      // A same-origin request without the token, or with another session's.
      { origin: h.url },
      { origin: h.url, 'x-csrf-token': (await login()).csrfToken },
    ];
    for (const headers of refusals)
      expect(await problemOf(await requeue(session, headers)), JSON.stringify(headers)).toEqual({
        status: 403,
        type: expect.stringContaining('application/problem+json'),
        code: 'CSRF_REJECTED',
      });
    // The classic form post: text/plain, no custom header, from another origin.
    const form = await fetch(`${h.url}/dashboard/api/dead-letters/outbox/requeue`, {
      method: 'POST',
      headers: { cookie: session.cookie, 'content-type': 'text/plain', origin: 'null' },
      body: '{"reason":"csrf"}',
    });
    expect((await problemOf(form)).code).toBe('CSRF_REJECTED');
  });

  it('takes a change from its own page with the token', async () => {
    const session = await login();
    const same = await requeue(session, {
      origin: h.url,
      'sec-fetch-site': 'same-origin',
      'x-csrf-token': session.csrfToken,
    });
    expect(same.status).toBe(200);
    expect(await same.json()).toMatchObject({ requeued: expect.any(Array) });
    // A client that is no browser (no Origin, no Sec-Fetch-Site) still needs the token.
    expect((await requeue(session, { 'x-csrf-token': session.csrfToken })).status).toBe(200);
  });

  it('refuses a login or logout from another origin, and the session survives such a logout', async () => {
    const foreignLogin = await fetch(`${h.url}/dashboard/api/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', origin: 'https://evil.example' },
      body: JSON.stringify({ token: h.adminToken }),
    });
    expect((await problemOf(foreignLogin)).code).toBe('CSRF_REJECTED');
    const session = await login();
    for (const headers of [{ origin: 'https://evil.example' }, {}] as Record<string, string>[]) {
      const logout = await fetch(`${h.url}/dashboard/api/logout`, {
        method: 'POST',
        headers: { cookie: session.cookie, ...headers },
      });
      expect((await problemOf(logout)).code).toBe('CSRF_REJECTED');
    }
    expect((await me(session)).status).toBe(200);
  });
});

describe('security headers', () => {
  const expectHeaders = (response: Response, what: string) => {
    const csp = response.headers.get('content-security-policy') ?? '';
    expect(csp, what).toContain("frame-ancestors 'none'");
    expect(csp, what).toMatch(/script-src 'self'(;|$)/);
    expect(csp, what).toContain("object-src 'none'");
    expect(response.headers.get('x-content-type-options'), what).toBe('nosniff');
    expect(response.headers.get('referrer-policy'), what).toBe('no-referrer');
    expect(response.headers.get('x-frame-options'), what).toBe('DENY');
    expect(response.headers.get('cross-origin-opener-policy'), what).toBe('same-origin');
  };

  it('are on the dashboard, its API, the docs, the API and its errors', async () => {
    const session = await login();
    const pages: [string, RequestInit?][] = [
      ['/dashboard/'],
      ['/dashboard/api/me', { headers: { cookie: session.cookie } }],
      ['/dashboard/api/tasks'],
      ['/docs/'],
      ['/docs/static/swagger-initializer.js'],
      ['/openapi.json'],
      ['/v1/tasks'],
      ['/healthz'],
      ['/no/such/route'],
    ];
    for (const [path, init] of pages) {
      const response = await fetch(`${h.url}${path}`, init);
      expect(response.status, path).toBeLessThan(500);
      expectHeaders(response, path);
    }
    // The dashboard's styles come from its files only; the docs' Swagger UI adds <style> elements.
    const page = await fetch(`${h.url}/dashboard/`);
    expect(page.headers.get('content-type')).toContain('text/html');
    expect(page.headers.get('content-security-policy')).toMatch(/style-src 'self'(;|$)/);
  });
});

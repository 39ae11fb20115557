/**
 * Operator single sign-on against a real OpenID provider (oidc-provider, in this process: oidcProvider.ts),
 * signing in over plain HTTP: the adapter (OidcSignIn) and the dashboard's SSO routes. No database: the
 * session the routes open is the lead's signIn, stood in for by a recorder.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHttpApp } from '../src/adapters/inbound/http/app.ts';
import { throttleAuthFailures } from '../src/adapters/inbound/http/authFailures.ts';
import {
  type DashboardSsoDeps,
  registerDashboardSsoRoutes,
  type SsoSession,
} from '../src/adapters/inbound/http/dashboardSsoRoutes.ts';
import { OidcSignIn, type OidcSignInSettings, SsoError } from '../src/adapters/outbound/oidc/oidcSignIn.ts';
import type { SsoIdentity } from '../src/core/identity/operatorSignIn.ts';
import { AppError } from '../src/core/shared/errors.ts';
import { startOidcProvider, type TestOidcProvider } from './oidcProvider.ts';

const redirectUrl = 'http://127.0.0.1:8080/dashboard/api/sso/callback';
const accounts = [
  { sub: 'alice', email: 'alice@example.com', name: 'Alice Ops', groups: ['tdp-admins', 'on-call'] },
  { sub: 'bob', email: 'bob@example.com', name: 'Bob' },
];

let provider: TestOidcProvider;
/** Another provider with the same client: its answers must not pass for the first one's. */
let otherProvider: TestOidcProvider;
/** A provider that puts no claims but `sub` in its ID tokens: groups and email come from userinfo. */
let leanProvider: TestOidcProvider;

beforeAll(async () => {
  provider = await startOidcProvider({
    redirectUris: [redirectUrl],
    accounts,
    clientSecret: 'client-secret',
  });
  otherProvider = await startOidcProvider({
    redirectUris: [redirectUrl],
    accounts,
    clientSecret: 'client-secret',
  });
  leanProvider = await startOidcProvider({ redirectUris: [redirectUrl], accounts, claimsInIdToken: false });
});

afterAll(async () => {
  await Promise.all([provider?.stop(), otherProvider?.stop(), leanProvider?.stop()]);
});

const settingsOf = (
  p: TestOidcProvider,
  overrides: Partial<OidcSignInSettings> = {},
): OidcSignInSettings => ({
  issuer: p.issuer,
  clientId: p.clientId,
  clientSecret: p.clientSecret,
  redirectUrl,
  scopes: 'openid email profile',
  nameClaim: 'email',
  groupsClaim: 'groups',
  ...overrides,
});

/** What `complete` threw: an SsoError, with its code. */
async function failureOf(promise: Promise<unknown>): Promise<SsoError> {
  const error = await promise.then(
    () => null,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(SsoError);
  return error as SsoError;
}

describe('the OIDC sign-in adapter', () => {
  it('signs a person in with the code flow and PKCE, and says who they are and their groups', async () => {
    const sso = new OidcSignIn(settingsOf(provider));
    const { url, pending } = await sso.begin();
    expect(url.origin).toBe(provider.issuer);
    expect(url.searchParams.get('client_id')).toBe(provider.clientId);
    expect(url.searchParams.get('redirect_uri')).toBe(redirectUrl);
    expect(url.searchParams.get('code_challenge_method')).toBe('S256');
    expect(url.searchParams.get('state')).toBe(pending.state);
    expect(url.searchParams.get('nonce')).toBe(pending.nonce);
    // The verifier itself never goes to the browser's address bar.
    expect(url.href).not.toContain(pending.codeVerifier);

    const callback = await provider.signIn(url, 'alice');
    expect(callback.searchParams.get('code')).toBeTruthy();
    const identity = await sso.complete(callback, pending);
    expect(identity).toEqual({
      issuer: provider.issuer,
      subject: 'alice',
      email: 'alice@example.com',
      emailVerified: true,
      name: 'alice@example.com',
      groups: ['tdp-admins', 'on-call'],
    });
  });

  it('names the person from the claim the settings say, and gives no groups when the provider has none', async () => {
    const sso = new OidcSignIn(settingsOf(provider, { nameClaim: 'name' }));
    const { url, pending } = await sso.begin();
    const identity = await sso.complete(await provider.signIn(url, 'bob'), pending);
    expect(identity).toMatchObject({ subject: 'bob', name: 'Bob', email: 'bob@example.com', groups: [] });
  });

  it('reads groups and email from userinfo when the ID token leaves them out', async () => {
    const sso = new OidcSignIn(settingsOf(leanProvider));
    const { url, pending } = await sso.begin();
    const identity = await sso.complete(await leanProvider.signIn(url, 'alice'), pending);
    expect(identity).toMatchObject({
      issuer: leanProvider.issuer,
      email: 'alice@example.com',
      groups: ['tdp-admins', 'on-call'],
    });
  });

  it('refuses an answer whose state is not this sign-in’s, without spending the code', async () => {
    const sso = new OidcSignIn(settingsOf(provider));
    const { url, pending } = await sso.begin();
    const callback = await provider.signIn(url, 'alice');
    const error = await failureOf(sso.complete(callback, { ...pending, state: 'another-sign-in' }));
    expect(error.code).toBe('SSO_REJECTED');
    // For people: what to do, no library words, no provider answer.
    expect(error.message).toMatch(/start the sign-in again/);
    expect(error.message).not.toMatch(/OAUTH|state|stack|at /i);
    expect(error.reason).toMatch(/state/);
    // The state is checked before the code goes anywhere: the right sign-in still completes.
    await expect(sso.complete(callback, pending)).resolves.toMatchObject({ subject: 'alice' });
  });

  it('refuses an ID token with another nonce, and a code exchanged with another PKCE verifier', async () => {
    const sso = new OidcSignIn(settingsOf(provider));
    const first = await sso.begin();
    const wrongNonce = await failureOf(
      sso.complete(await provider.signIn(first.url, 'alice'), { ...first.pending, nonce: 'not-this-one' }),
    );
    expect(wrongNonce.code).toBe('SSO_REJECTED');
    expect(wrongNonce.reason).toMatch(/"nonce"/);

    const second = await sso.begin();
    const wrongVerifier = await failureOf(
      sso.complete(await provider.signIn(second.url, 'alice'), {
        ...second.pending,
        codeVerifier: (await sso.begin()).pending.codeVerifier,
      }),
    );
    expect(wrongVerifier.code).toBe('SSO_REJECTED');
    expect(wrongVerifier.reason).toMatch(/invalid_grant/);
  });

  it('refuses an answer from another issuer, with or without its iss parameter', async () => {
    const sso = new OidcSignIn(settingsOf(provider));
    const { url, pending } = await sso.begin();
    // The same request, sent to the other provider (which knows the same client).
    const elsewhere = new URL(url.pathname + url.search, otherProvider.issuer);
    const callback = await otherProvider.signIn(elsewhere, 'alice');
    expect(callback.searchParams.get('iss')).toBe(otherProvider.issuer);
    const withIss = await failureOf(sso.complete(callback, pending));
    expect(withIss.code).toBe('SSO_REJECTED');
    expect(withIss.reason).toMatch(/"iss"/);
    // Without `iss`, refused as well: this provider says it always sends one.
    const stripped = new URL(callback);
    stripped.searchParams.delete('iss');
    const withoutIss = await failureOf(sso.complete(stripped, pending));
    expect(withoutIss.code).toBe('SSO_REJECTED');
  });

  it('refuses a sign-in the provider answered with an error (access denied)', async () => {
    const sso = new OidcSignIn(settingsOf(provider));
    const { pending } = await sso.begin();
    const callback = new URL(redirectUrl);
    callback.search = new URLSearchParams({
      error: 'access_denied',
      state: pending.state,
      iss: provider.issuer,
    }).toString();
    const denied = await failureOf(sso.complete(callback, pending));
    expect(denied.code).toBe('SSO_REJECTED');
    expect(denied.reason).toMatch(/access_denied/);
  });

  it('signs in through a provider told its client’s redirect URI after it started (as a server test needs)', async () => {
    const late = await startOidcProvider({ redirectUris: ['http://127.0.0.1:1/not-yet'], accounts });
    try {
      late.redirectTo([redirectUrl]);
      const sso = new OidcSignIn(settingsOf(late));
      const { url, pending } = await sso.begin();
      const callback = await late.signIn(url, 'bob');
      expect(callback.href.startsWith(redirectUrl)).toBe(true);
      await expect(sso.complete(callback, pending)).resolves.toMatchObject({ subject: 'bob' });
    } finally {
      await late.stop();
    }
  });

  it('reports a provider that is down as unavailable, and discovers it again once it is back', async () => {
    const down = await startOidcProvider({ redirectUris: [redirectUrl], accounts });
    try {
      const sso = new OidcSignIn(settingsOf(down));
      await down.down();
      const unreachable = await failureOf(sso.begin());
      expect(unreachable.code).toBe('SSO_UNAVAILABLE');
      expect(unreachable.message).toMatch(/could not be reached/);
      expect(unreachable.reason).toMatch(/discovery/);

      await down.up();
      down.failing(true);
      expect((await failureOf(sso.begin())).code).toBe('SSO_UNAVAILABLE');

      down.failing(false);
      const { url, pending } = await sso.begin();
      // Discovered now; the provider goes away between the redirect and the callback.
      const callback = await down.signIn(url, 'alice');
      await down.down();
      expect((await failureOf(sso.complete(callback, pending))).code).toBe('SSO_UNAVAILABLE');
      await down.up();
      await expect(sso.complete(callback, pending)).resolves.toMatchObject({ subject: 'alice' });
      // Discovered already, it is asked again at the next start: gone meanwhile, it is reported there.
      await down.down();
      expect((await failureOf(sso.begin())).code).toBe('SSO_UNAVAILABLE');
    } finally {
      await down.stop();
    }
  });
});

/** The dashboard's SSO routes on the real HTTP app (problem+json, the failed-sign-in throttle). */
describe('the dashboard SSO routes', () => {
  const cookieKey = new Uint8Array(32).fill(7);
  let now = new Date('2030-01-01T00:00:00Z').getTime();
  const clock = { now: () => new Date(now) };
  const logLines: string[] = [];

  async function appWith(
    sso: DashboardSsoDeps['sso'],
    signIn: (identity: SsoIdentity) => Promise<SsoSession> = async () => ({
      id: 'session-1',
      csrfToken: 'csrf-1',
      expiresAt: new Date(now + 3_600_000),
    }),
  ) {
    const signedIn: SsoIdentity[] = [];
    const app: FastifyInstance = await createHttpApp({
      logger: pino({ level: 'info' }, { write: (line: string) => void logLines.push(line) }),
      bodyLimitBytes: 1_000_000,
      jsonMaxDepth: 64,
      requestDeadlineMs: 20_000,
      publicUrl: 'http://127.0.0.1:8080',
      version: 'test',
      trustProxy: 'loopback',
      listener: {
        headersTimeoutMs: 10_000,
        requestReadTimeoutMs: 10_000,
        keepAliveTimeoutMs: 5_000,
        maxConnectionsPerIp: 100,
      },
    });
    throttleAuthFailures(app, { failures: 5, windowSeconds: 60 }, () => {});
    registerDashboardSsoRoutes(app, {
      sso,
      signIn: async (identity) => {
        signedIn.push(identity);
        return signIn(identity);
      },
      setSessionCookie: (_request: FastifyRequest, reply: FastifyReply, session: SsoSession) => {
        reply.header('set-cookie', `tdp_operator=${session.id}; Path=/dashboard; HttpOnly; SameSite=Strict`);
      },
      cookieKey,
      clock,
    });
    await app.ready();
    return { app, signedIn };
  }

  const cookiesOf = (headers: Record<string, unknown>) => {
    const value = headers['set-cookie'];
    return (Array.isArray(value) ? value : value ? [value] : []) as string[];
  };
  const ssoCookie = (setCookies: string[]) => {
    const line = setCookies.find((c) => /^(__Host-)?tdp_sso=/.test(c));
    return line?.split(';')[0] ?? '';
  };
  const pathOf = (url: URL) => url.pathname + url.search;

  it('start sends the browser to the provider with a sealed, short-lived cookie; the callback opens a session', async () => {
    const { app, signedIn } = await appWith(new OidcSignIn(settingsOf(provider)));
    try {
      const start = await app.inject({ method: 'GET', url: '/dashboard/api/sso/start' });
      expect(start.statusCode).toBe(302);
      const location = new URL(start.headers.location as string);
      expect(location.origin).toBe(provider.issuer);
      const [setCookie] = cookiesOf(start.headers);
      expect(setCookie).toMatch(
        /^tdp_sso=[^;]+; Path=\/dashboard\/api\/sso; HttpOnly; SameSite=Lax; Max-Age=600$/,
      );
      const cookie = ssoCookie(cookiesOf(start.headers));
      // Sealed: the state and verifier cannot be read from it.
      expect(cookie).not.toContain(location.searchParams.get('state')!);

      const callback = await provider.signIn(location, 'alice');
      const done = await app.inject({ method: 'GET', url: pathOf(callback), headers: { cookie } });
      expect(done.statusCode).toBe(302);
      expect(done.headers.location).toBe('/dashboard/');
      const set = cookiesOf(done.headers);
      expect(set).toContain('tdp_operator=session-1; Path=/dashboard; HttpOnly; SameSite=Strict');
      expect(set.find((c) => c.startsWith('tdp_sso='))).toMatch(/^tdp_sso=; .*Max-Age=0$/);
      expect(signedIn).toEqual([
        {
          issuer: provider.issuer,
          subject: 'alice',
          email: 'alice@example.com',
          emailVerified: true,
          name: 'alice@example.com',
          groups: ['tdp-admins', 'on-call'],
        },
      ]);
      // The log says why nothing failed, and never holds the code or the cookie.
      expect(logLines.join('\n')).not.toContain(callback.searchParams.get('code')!);
    } finally {
      await app.close();
    }
  });

  it('uses a __Host- Secure cookie over TLS', async () => {
    const { app } = await appWith(new OidcSignIn(settingsOf(provider)));
    try {
      const start = await app.inject({
        method: 'GET',
        url: '/dashboard/api/sso/start',
        headers: { 'x-forwarded-proto': 'https' },
      });
      expect(cookiesOf(start.headers)[0]).toMatch(
        /^__Host-tdp_sso=[^;]+; Path=\/; Secure; HttpOnly; SameSite=Lax; Max-Age=600$/,
      );
    } finally {
      await app.close();
    }
  });

  it('refuses a callback without the cookie, with a forged or expired one, or of another sign-in (400 SSO_REJECTED)', async () => {
    const { app, signedIn } = await appWith(new OidcSignIn(settingsOf(provider)));
    try {
      const begin = async () => {
        const start = await app.inject({ method: 'GET', url: '/dashboard/api/sso/start' });
        return {
          cookie: ssoCookie(cookiesOf(start.headers)),
          location: new URL(start.headers.location as string),
        };
      };
      const refused = async (url: string, cookie?: string) => {
        const answer = await app.inject({ method: 'GET', url, headers: cookie ? { cookie } : {} });
        expect(answer.statusCode).toBe(400);
        expect(answer.headers['content-type']).toMatch(/application\/problem\+json/);
        expect(answer.json()).toMatchObject({ code: 'SSO_REJECTED', status: 400 });
        return answer.json() as { detail: string };
      };

      const mine = await begin();
      const callback = pathOf(await provider.signIn(mine.location, 'alice'));
      expect((await refused(callback)).detail).toMatch(/start it again/);
      // One character changed in the sealed value: it no longer opens.
      const [name, value] = mine.cookie.split('=') as [string, string];
      const flipped = value.slice(0, -5) + (value.at(-5) === 'A' ? 'B' : 'A') + value.slice(-4);
      await refused(callback, `${name}=${flipped}`);
      // A genuine cookie of another sign-in in this browser: its state is not this answer's.
      const other = await begin();
      await refused(callback, other.cookie);
      // Ten minutes later the cookie has expired.
      now += 11 * 60_000;
      await refused(callback, mine.cookie);
      expect(signedIn).toEqual([]);
    } finally {
      await app.close();
    }
  });

  it('answers 403 SSO_NO_ROLE when the person signs in but no role maps, and counts refusals in the throttle', async () => {
    const { app } = await appWith(new OidcSignIn(settingsOf(provider)), async () => {
      throw new AppError('SSO_NO_ROLE', 'none of your groups gives a role in TDP; ask an admin');
    });
    try {
      const start = await app.inject({ method: 'GET', url: '/dashboard/api/sso/start' });
      const cookie = ssoCookie(cookiesOf(start.headers));
      const callback = await provider.signIn(new URL(start.headers.location as string), 'bob');
      const answer = await app.inject({ method: 'GET', url: pathOf(callback), headers: { cookie } });
      expect(answer.statusCode).toBe(403);
      expect(answer.json()).toMatchObject({ code: 'SSO_NO_ROLE' });
      // Four more refusals (400: no cookie) close the address: the fifth failure is the limit.
      for (let i = 0; i < 4; i += 1) {
        const again = await app.inject({ method: 'GET', url: '/dashboard/api/sso/callback?code=x&state=y' });
        expect(again.statusCode).toBe(400);
      }
      const throttled = await app.inject({ method: 'GET', url: '/dashboard/api/sso/start' });
      expect(throttled.statusCode).toBe(429);
      expect(throttled.json()).toMatchObject({ code: 'AUTH_THROTTLED' });
    } finally {
      await app.close();
    }
  });

  it('answers 502 SSO_UNAVAILABLE when the provider is down', async () => {
    const down = await startOidcProvider({ redirectUris: [redirectUrl], accounts });
    await down.down();
    const { app } = await appWith(new OidcSignIn(settingsOf(down)));
    try {
      const answer = await app.inject({ method: 'GET', url: '/dashboard/api/sso/start' });
      expect(answer.statusCode).toBe(502);
      expect(answer.json()).toMatchObject({ code: 'SSO_UNAVAILABLE', retryable: true });
      expect(answer.json().detail).not.toMatch(/fetch|ECONN|127\.0\.0\.1/);
    } finally {
      await app.close();
      await down.stop();
    }
  });

  it('answers 404 on both routes when single sign-on is off', async () => {
    const { app } = await appWith(null);
    try {
      for (const url of ['/dashboard/api/sso/start', '/dashboard/api/sso/callback?code=x&state=y']) {
        const answer = await app.inject({ method: 'GET', url });
        expect(answer.statusCode).toBe(404);
        expect(answer.json()).toMatchObject({ code: 'ROUTE_NOT_FOUND' });
      }
    } finally {
      await app.close();
    }
  });
});

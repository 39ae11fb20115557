/**
 * Single sign-on to the dashboard (OpenID Connect, authorization code with PKCE). `start` sends the
 * browser to the provider; the state, nonce and PKCE verifier go with it in a cookie sealed with the
 * server's key (encrypted and authenticated: the browser can neither read nor forge it), HttpOnly,
 * SameSite=Lax (the provider's redirect back is a top-level navigation from another site), for ten
 * minutes, `__Host-` and Secure over TLS. `callback` checks the provider's answer against that cookie,
 * opens a session for the person (deps.signIn: their operator and roles), sets the session cookie and
 * sends the browser to the dashboard.
 *
 * Refusals are problem+json: SSO_REJECTED (400: no or a bad cookie, a wrong state, nonce or issuer, a
 * refused code), SSO_NO_ROLE (403, from signIn), SSO_UNAVAILABLE (502). The 400s and 403s count as
 * failed sign-ins in the per-address throttle (authFailures.ts). With single sign-on off, both routes
 * answer 404 as unknown routes do.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { EncryptJWT, jwtDecrypt } from 'jose';
import type { OpenedSession } from '../../../core/identity/operatorSessions.ts';
import type { SsoIdentity } from '../../../core/identity/operatorSignIn.ts';
import { AppError } from '../../../core/shared/errors.ts';
import type { Clock } from '../../../core/shared/ports.ts';
import { SsoError, type SsoPending } from '../../outbound/oidc/oidcSignIn.ts';
import { cookieOf, overTls } from './browserRequests.ts';

/** The sign-in flow with a provider (OidcSignIn). */
export interface SsoSignInFlow {
  /** Where the provider sends the browser back; the callback's query is read against it. */
  readonly redirectUrl: string;
  begin(): Promise<{ url: URL; pending: SsoPending }>;
  complete(callbackUrl: URL, pending: SsoPending): Promise<SsoIdentity>;
}

/** A session opened for a person the provider vouched for. */
export type SsoSession = OpenedSession;

export interface DashboardSsoDeps {
  /** Null: single sign-on is off. */
  sso: SsoSignInFlow | null;
  /** Opens the person's session; throws an AppError (SSO_NO_ROLE, …) when they may not sign in. */
  signIn(identity: SsoIdentity): Promise<SsoSession>;
  /** Sets the dashboard's session cookie on the reply. */
  setSessionCookie(request: FastifyRequest, reply: FastifyReply, session: SsoSession): void;
  /** Seals the pending sign-in's cookie (A256GCM): 32 bytes, derived from the secret keyring. */
  cookieKey: Uint8Array;
  clock: Clock;
}

const cookieName = 'tdp_sso';
const secureCookieName = `__Host-${cookieName}`;
const pendingSeconds = 600;
const audience = 'tdp:sso-pending';

export function registerDashboardSsoRoutes(app: FastifyInstance, deps: DashboardSsoDeps): void {
  const nowSeconds = () => Math.floor(deps.clock.now().getTime() / 1000);
  const pendingCookie = (request: FastifyRequest, value: string, maxAgeSeconds: number) =>
    overTls(request)
      ? `${secureCookieName}=${value}; Path=/; Secure; HttpOnly; SameSite=Lax; Max-Age=${maxAgeSeconds}`
      : `${cookieName}=${value}; Path=/dashboard/api/sso; HttpOnly; SameSite=Lax; Max-Age=${maxAgeSeconds}`;

  const seal = (pending: SsoPending) =>
    new EncryptJWT({ state: pending.state, nonce: pending.nonce, codeVerifier: pending.codeVerifier })
      .setProtectedHeader({ alg: 'dir', enc: 'A256GCM' })
      .setAudience(audience)
      .setIssuedAt(nowSeconds())
      .setExpirationTime(nowSeconds() + pendingSeconds)
      .encrypt(deps.cookieKey);

  /** The pending sign-in the cookie holds; null when it is missing, forged, of another key or expired. */
  const unseal = async (request: FastifyRequest): Promise<SsoPending | null> => {
    const sealed = cookieOf(request, overTls(request) ? secureCookieName : cookieName);
    if (!sealed) return null;
    try {
      const { payload } = await jwtDecrypt(sealed, deps.cookieKey, {
        audience,
        currentDate: deps.clock.now(),
        keyManagementAlgorithms: ['dir'],
        contentEncryptionAlgorithms: ['A256GCM'],
      });
      const { state, nonce, codeVerifier } = payload;
      return typeof state === 'string' && typeof nonce === 'string' && typeof codeVerifier === 'string'
        ? { state, nonce, codeVerifier }
        : null;
    } catch {
      return null;
    }
  };

  const flowOf = (request: FastifyRequest): SsoSignInFlow => {
    if (!deps.sso)
      throw new AppError('ROUTE_NOT_FOUND', `no endpoint ${request.method} ${request.url.split('?')[0]}`);
    return deps.sso;
  };
  /**
   * Logs why the provider's answer was refused (the library's words, never a token), then passes it on;
   * the error handler logs a 502 itself.
   */
  const logged = (request: FastifyRequest, error: unknown): never => {
    if (error instanceof SsoError && error.code === 'SSO_REJECTED')
      request.log.warn({ code: error.code, reason: error.reason }, 'single sign-on refused');
    throw error;
  };
  const options = {
    schema: { hide: true },
    // A sign-in: the address's failed attempts are counted (its 400s and 403s too) and throttled.
    config: { credentialInBody: true, countsAsSignIn: true },
  };

  app.get('/dashboard/api/sso/start', options, async (request, reply) => {
    const flow = flowOf(request);
    const { url, pending } = await flow.begin().catch((error: unknown) => logged(request, error));
    return reply
      .header('set-cookie', pendingCookie(request, await seal(pending), pendingSeconds))
      .header('cache-control', 'no-store')
      .redirect(url.href, 302);
  });

  app.get('/dashboard/api/sso/callback', options, async (request, reply) => {
    const flow = flowOf(request);
    const pending = await unseal(request);
    if (!pending)
      throw new SsoError(
        'SSO_REJECTED',
        'this sign-in was not started in this browser, or took longer than 10 minutes; start it again',
        'no pending sign-in cookie, or one that does not open',
      );
    // The provider's answer is the query; the URL it came to is the configured one, not the Host header.
    const callbackUrl = new URL(flow.redirectUrl);
    callbackUrl.search = new URL(request.url, 'http://callback').search;
    const identity = await flow
      .complete(callbackUrl, pending)
      .catch((error: unknown) => logged(request, error));
    const session = await deps.signIn(identity);
    deps.setSessionCookie(request, reply, session);
    return reply
      .header('set-cookie', pendingCookie(request, '', 0))
      .header('cache-control', 'no-store')
      .redirect('/dashboard/', 302);
  });
}

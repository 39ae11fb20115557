/**
 * Signing in to the dashboard, and the gate of its API. An operator signs in with their email and
 * password, through single sign-on (dashboardSsoRoutes.ts), or with the bootstrap admin token while it
 * is on; the answer is a session cookie (HttpOnly, SameSite=Strict, and `Secure` with the `__Host-`
 * prefix over TLS) naming a session kept on the server, so no credential lives in the browser and
 * signing out, being disabled or being signed out by an admin ends it at once. Every state change also
 * needs the page's origin and the session's CSRF token (browserRequests.ts).
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { SignJWT } from 'jose';
import { channels, operatorSubject } from '../../../core/facts/projections.ts';
import { tokensEqual } from '../../../core/identity/apiKeys.ts';
import {
  allows,
  holdsSomewhere,
  type OperatorPrincipal,
  tenantReach,
} from '../../../core/identity/operatorAccess.ts';
import {
  closeOperatorSession,
  csrfTokenMatches,
  type OpenedSession,
  type OperatorSessionDeps,
  openOperatorSession,
  csrfTokenOf as sessionCsrfToken,
  sessionPrincipal,
} from '../../../core/identity/operatorSessions.ts';
import { type SignInDeps, signInWithPassword } from '../../../core/identity/operatorSignIn.ts';
import { AppError } from '../../../core/shared/errors.ts';
import type { Clock } from '../../../core/shared/ports.ts';
import {
  changesState,
  cookieOf,
  csrfRejected,
  csrfTokenOf,
  overTls,
  realtimeUrlOf,
  refuseCrossSite,
} from './browserRequests.ts';
import { admit, type OperatorGate, operatorOf } from './operatorAuth.ts';
import { problem, sendProblem } from './problems.ts';

export interface DashboardSessionDeps {
  sessions: OperatorSessionDeps;
  signIn: SignInDeps;
  /** The bootstrap admin token, while it is on (null: off). */
  bootstrapToken: string | null;
  /** Whether single sign-on is set up (the sign-in page shows its button). */
  ssoEnabled: boolean;
  /** Signs the operators' realtime connection tokens (the gateway's key). */
  realtimeKey: Uint8Array;
  clock: Clock;
  wsUrl?: string | null;
}

/** Over TLS the cookie is `__Host-` (Secure, Path=/, no Domain: no other host or plain-http page can set it). */
const cookieName = 'tdp_operator';
const secureCookieName = `__Host-${cookieName}`;

export const sessionCookieOf = (request: FastifyRequest) =>
  cookieOf(request, secureCookieName) ?? cookieOf(request, cookieName);

/** Sets (or, with `maxAgeSeconds` 0, clears) the session cookie on the reply. */
export function setSessionCookie(
  request: FastifyRequest,
  reply: FastifyReply,
  value: string,
  maxAgeSeconds: number,
): void {
  reply.header(
    'set-cookie',
    overTls(request)
      ? `${secureCookieName}=${value}; Path=/; Secure; HttpOnly; SameSite=Strict; Max-Age=${maxAgeSeconds}`
      : `${cookieName}=${value}; Path=/dashboard; HttpOnly; SameSite=Strict; Max-Age=${maxAgeSeconds}`,
  );
}

/** Sets the cookie of a session just opened, living as long as the session. */
export function setOpenedSessionCookie(
  request: FastifyRequest,
  reply: FastifyReply,
  session: OpenedSession,
  now: Date,
): void {
  setSessionCookie(
    request,
    reply,
    session.id,
    Math.floor((session.expiresAt.getTime() - now.getTime()) / 1000),
  );
}

/** The dashboard API's gate: a live session, a role enough for the route, and for a change its origin and token. */
export function dashboardGate(sessions: OperatorSessionDeps, ssoEnabled: boolean): OperatorGate {
  return (least, where) => async (request, reply) => {
    if (changesState(request)) refuseCrossSite(request);
    const id = sessionCookieOf(request);
    const principal = id ? await sessionPrincipal(sessions, id) : null;
    if (!principal)
      // The sign-in page reads `ssoEnabled` from this answer to offer single sign-on.
      return sendProblem(
        reply,
        Object.assign(
          problem(
            'UNAUTHENTICATED',
            id ? 'the dashboard session ended; sign in again' : 'sign in to the dashboard',
            undefined,
            request.url,
          ),
          { ssoEnabled },
        ),
      );
    if (changesState(request) && !csrfTokenMatches(sessions, id!, csrfTokenOf(request))) throw csrfRejected();
    admit(request, principal, least, where);
  };
}

/** What the page may show: the controls each role allows (the server refuses the others anyway). */
const abilities = (p: OperatorPrincipal) => ({
  act: holdsSomewhere(p, 'operator'),
  actOnPlatform: allows(p, 'operator', 'platform'),
  admin: allows(p, 'admin', 'platform'),
  seePlatform: allows(p, 'viewer', 'platform'),
});

export function registerDashboardSessionRoutes(
  app: FastifyInstance,
  deps: DashboardSessionDeps,
  gate: OperatorGate,
): void {
  const hidden = { hide: true };
  const nowSeconds = () => Math.floor(deps.clock.now().getTime() / 1000);
  const answerSession = (request: FastifyRequest, reply: FastifyReply, session: OpenedSession) => {
    setOpenedSessionCookie(request, reply, session, deps.clock.now());
    return reply.send({ expiresAt: session.expiresAt.toISOString(), csrfToken: session.csrfToken });
  };

  app.post<{ Body: { email?: unknown; password?: unknown; token?: unknown } }>(
    '/dashboard/api/login',
    { schema: hidden, config: { credentialInBody: true } },
    async (request, reply) => {
      refuseCrossSite(request);
      const { email, password, token } = request.body ?? {};
      if (typeof token === 'string') {
        if (!token || deps.bootstrapToken === null || !tokensEqual(token, deps.bootstrapToken))
          throw new AppError(
            'UNAUTHENTICATED',
            'that is not the bootstrap admin token, or it is switched off',
          );
        return answerSession(
          request,
          reply,
          await openOperatorSession(deps.sessions, { operatorId: null, method: 'bootstrap' }),
        );
      }
      if (
        typeof email !== 'string' ||
        typeof password !== 'string' ||
        email.length > 320 ||
        password.length > 1024
      )
        throw new AppError('UNAUTHENTICATED', 'that email and password do not match an active operator');
      return answerSession(request, reply, await signInWithPassword(deps.signIn, email, password));
    },
  );

  // Ends the session on the server (its cookie is refused from now on, wherever a copy of it is).
  app.post('/dashboard/api/logout', { schema: hidden }, async (request, reply) => {
    refuseCrossSite(request);
    const id = sessionCookieOf(request);
    if (id && (await sessionPrincipal(deps.sessions, id))) {
      if (!csrfTokenMatches(deps.sessions, id, csrfTokenOf(request))) throw csrfRejected();
      await closeOperatorSession(deps.sessions, id);
    }
    setSessionCookie(request, reply, '', 0);
    return reply.send({ ok: true });
  });

  // The page asks on load: who is signed in, what they may do, and the token it sends with each change.
  app.get('/dashboard/api/me', { schema: hidden, onRequest: gate('viewer', 'tenants') }, async (request) => {
    const me = operatorOf(request);
    return {
      operator: { id: me.operatorId, displayName: me.displayName, email: me.email },
      roles: me.bindings,
      can: abilities(me),
      csrfToken: sessionCsrfToken(deps.sessions, sessionCookieOf(request)!),
      sso: { enabled: deps.ssoEnabled },
    };
  });

  /**
   * The live feed: every task's summary for a platform-wide viewer; for one bound to tenants, the
   * channels of those tenants only.
   */
  app.get(
    '/dashboard/api/realtime-token',
    { schema: hidden, onRequest: gate('viewer', 'tenants') },
    async (request) => {
      const me = operatorOf(request);
      const reach = tenantReach(me, 'viewer');
      const feed = reach === 'all' ? [channels.operator] : reach.map(channels.operatorTenant);
      const token = await new SignJWT({ sub: operatorSubject(me.operatorId), channels: feed })
        .setProtectedHeader({ alg: 'HS256' })
        .setIssuedAt(nowSeconds())
        .setExpirationTime(nowSeconds() + 900)
        .sign(deps.realtimeKey);
      return { token, url: realtimeUrlOf(request, deps.wsUrl), channel: feed[0] ?? null, channels: feed };
    },
  );
}

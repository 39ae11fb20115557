/**
 * Failed authentications per client address: after `failures` refused credentials (401) from one
 * address within a window, every request from it that presents a credential is answered 429
 * AUTH_THROTTLED until the window ends, even with a valid credential, so a guesser learns nothing from
 * the answer. The window is fixed from the first failure; a success elsewhere resets nothing.
 *
 * A request presents a credential when it carries `Authorization` (API keys, user tokens, worker keys,
 * execution tokens, the admin token) or goes to a route whose config says `credentialInBody` (the
 * dashboard's login). A route whose config says `countsAsSignIn` (single sign-on) refuses with 400 or 403
 * rather than 401 (a wrong state, no role): those count as failures too. A client is an address, or an
 * IPv6 /64 (clientAddress.ts). The counts are this
 * process's, as the per-credential buckets are (rateLimits.ts):
 * a replica's count is its own.
 *
 * The check runs on every authenticated request, so it is synchronous: a map lookup, none at all while no
 * address has failed. (An asynchronous limiter's two hooks per request cost about 4% of the end-to-end
 * benchmark's CPU.)
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { clientOf } from './clientAddress.ts';
import { problem, sendProblem } from './problems.ts';

export interface AuthFailurePolicy {
  /** Failures from one address that close it for the rest of the window (`0`: no limit). */
  failures: number;
  windowSeconds: number;
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The route takes a credential in its body (a login): its 401s count as failed authentications. */
    credentialInBody?: boolean;
    /** A sign-in that refuses with 400 or 403 (single sign-on): those count as failed authentications too. */
    countsAsSignIn?: boolean;
  }
  interface FastifyRequest {
    /**
     * An operator was refused what their roles do not reach (403, or 404 for another tenant's resource):
     * probing for it counts as a failed authentication.
     */
    accessRefused?: true;
  }
}

/** Past this many addresses with a window open, the oldest windows are dropped first. */
const maxAddresses = 100_000;

/** Each address's failures in its current window (fixed from its first failure). */
export class FailureWindows {
  private readonly windows = new Map<string, { failures: number; endsAt: number }>();

  constructor(
    private readonly policy: AuthFailurePolicy,
    private readonly now: () => number = Date.now,
  ) {}

  /** No address has failed in a window still open (the common case: nothing to look up). */
  get empty(): boolean {
    return this.windows.size === 0;
  }

  /** Milliseconds until the address may present a credential again; 0 when it may now. */
  closedFor(address: string): number {
    const window = this.windows.get(address);
    if (!window) return 0;
    const left = window.endsAt - this.now();
    if (left <= 0) {
      this.windows.delete(address);
      return 0;
    }
    return window.failures >= this.policy.failures ? left : 0;
  }

  failed(address: string): void {
    const now = this.now();
    let window = this.windows.get(address);
    if (!window || window.endsAt <= now) {
      if (window) this.windows.delete(address);
      if (this.windows.size >= maxAddresses) this.prune(now);
      window = { failures: 0, endsAt: now + this.policy.windowSeconds * 1000 };
      this.windows.set(address, window);
    }
    window.failures += 1;
  }

  /** Drops the ended windows, then, if still full, the oldest (a map keeps insertion order). */
  private prune(now: number): void {
    for (const [address, window] of this.windows) if (window.endsAt <= now) this.windows.delete(address);
    for (const address of this.windows.keys()) {
      if (this.windows.size < maxAddresses) break;
      this.windows.delete(address);
    }
  }
}

const presentsCredential = (request: FastifyRequest) =>
  request.headers.authorization !== undefined ||
  request.routeOptions.config?.credentialInBody === true ||
  // The dashboard's session cookie (tdp_operator, or __Host-tdp_operator over TLS).
  request.headers.cookie?.includes('tdp_operator=') === true;

/** A credential refused (401), or a sign-in refused (400, 403: single sign-on's wrong state, no role). */
const failedAuthentication = (request: FastifyRequest, status: number) =>
  (status === 401 && presentsCredential(request)) ||
  ((status === 400 || status === 403) && request.routeOptions.config?.countsAsSignIn === true) ||
  request.accessRefused === true;

/**
 * Counts failed authentications per address (401s, and refused sign-ins) and refuses the credentials of
 * an address past its failures (global hooks).
 */
export function throttleAuthFailures(
  app: FastifyInstance,
  policy: AuthFailurePolicy,
  refused: () => void,
): void {
  if (policy.failures <= 0) return;
  const windows = new FailureWindows(policy);
  app.addHook('onRequest', (request, reply, done) => {
    const closedMs =
      !windows.empty && presentsCredential(request) ? windows.closedFor(clientOf(request.ip)) : 0;
    if (closedMs === 0) return done();
    refused();
    sendProblem(
      reply.header('retry-after', String(Math.max(1, Math.ceil(closedMs / 1000)))),
      problem(
        'AUTH_THROTTLED',
        'too many failed authentications from this address; retry after Retry-After seconds',
        undefined,
        request.url,
      ),
    );
  });
  app.addHook('onResponse', (request, reply, done) => {
    if (failedAuthentication(request, reply.statusCode)) windows.failed(clientOf(request.ip));
    done();
  });
}

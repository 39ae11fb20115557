/**
 * Failed authentications per client address: after `failures` refused credentials (401) from one
 * address within a window, every request from it that presents a credential is answered 429
 * AUTH_THROTTLED until the window ends, even with a valid credential, so a guesser learns nothing from
 * the answer. The window is fixed from the first failure; a success elsewhere resets nothing.
 *
 * A request presents a credential when it carries `Authorization` (API keys, user tokens, worker keys,
 * execution tokens, the admin token) or goes to a route whose config says `credentialInBody` (the
 * dashboard's login). The counts are rate-limiter-flexible's memory store, per process, as the
 * per-credential buckets are (rateLimits.ts): a replica's count is its own.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { RateLimiterMemory } from 'rate-limiter-flexible';
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
  }
}

const presentsCredential = (request: FastifyRequest) =>
  request.headers.authorization !== undefined || request.routeOptions.config?.credentialInBody === true;

/** Counts 401s per address and refuses the credentials of an address past its failures (global hooks). */
export function throttleAuthFailures(
  app: FastifyInstance,
  policy: AuthFailurePolicy,
  refused: () => void,
): void {
  if (policy.failures <= 0) return;
  const failures = new RateLimiterMemory({ points: policy.failures, duration: policy.windowSeconds });
  app.addHook('onRequest', async (request, reply) => {
    if (!presentsCredential(request)) return;
    const counted = await failures.get(request.ip);
    if (!counted || counted.consumedPoints < policy.failures) return;
    refused();
    return sendProblem(
      reply.header('retry-after', String(Math.max(1, Math.ceil(counted.msBeforeNext / 1000)))),
      problem(
        'AUTH_THROTTLED',
        'too many failed authentications from this address; retry after Retry-After seconds',
        undefined,
        request.url,
      ),
    );
  });
  app.addHook('onResponse', async (request, reply) => {
    if (reply.statusCode !== 401 || !presentsCredential(request)) return;
    // Rejects once the address is past its failures; the next request is refused in onRequest.
    await failures.consume(request.ip).catch(() => {});
  });
}

/**
 * Rate limits of the HTTP API: a token bucket per authenticated credential, charged where the
 * credential is recognised (so a refused request has done nothing yet). Requests with an application's
 * API key or with a user token it minted share the application's bucket; a worker key has its own; an
 * execution token its execution's. The buckets live in this process (docs/rate-limits.md).
 */
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import type { Counter } from 'prom-client';
import { Type } from 'typebox';
import { ApiKeyAuthenticator } from '../../../core/identity/authenticate.ts';
import type { ApplicationPrincipal, IdentityStore } from '../../../core/identity/ports.ts';
import { AppError } from '../../../core/shared/errors.ts';
import type { Clock } from '../../../core/shared/ports.ts';
import { type BucketPolicy, TokenBuckets } from '../../../core/shared/tokenBuckets.ts';
import type { UserPrincipal, UserTokens } from '../../../core/status/ports.ts';

/** The credentials with a token bucket each: an application's API key or user tokens, a worker key, an execution token. */
export type RateLimitedCredential = 'application' | 'worker' | 'execution';
export type RateLimitPolicies = Record<RateLimitedCredential, BucketPolicy>;

/** A 429 RATE_LIMITED with the headers that tell the client when to come back. */
export class RateLimitedError extends AppError {
  constructor(
    readonly credential: RateLimitedCredential,
    readonly retryAfterSeconds: number,
    private readonly policy: BucketPolicy,
  ) {
    super(
      'RATE_LIMITED',
      `too many requests with this ${credential} credential; retry after ${retryAfterSeconds} s`,
    );
  }

  /** `Retry-After`, and the policy and state as draft-ietf-httpapi-ratelimit-headers writes them. */
  headers(): Record<string, string> {
    const windowSeconds = Math.max(1, Math.ceil(this.policy.burst / this.policy.perSecond));
    return {
      'retry-after': String(this.retryAfterSeconds),
      'ratelimit-policy': `"${this.credential}";q=${this.policy.burst};w=${windowSeconds}`,
      ratelimit: `"${this.credential}";r=0;t=${this.retryAfterSeconds}`,
    };
  }
}

export class RateLimits {
  private readonly buckets: Record<RateLimitedCredential, TokenBuckets>;
  /** Keys refused since their last accepted request: a run of refusals is logged once, at its start. */
  private readonly refusing = new Set<string>();

  constructor(
    clock: Clock,
    private readonly policies: RateLimitPolicies,
    private readonly refusals: Counter<'credential'>,
    private readonly logger: Logger,
    /** Runs of refusals remembered at most (forgetting one only logs its next refusal again). */
    private readonly maxRefusingKeys = 10_000,
  ) {
    this.buckets = {
      application: new TokenBuckets(clock, policies.application),
      worker: new TokenBuckets(clock, policies.worker),
      execution: new TokenBuckets(clock, policies.execution),
    };
  }

  /** Takes a token for the credential `id` (an id, never a secret), or throws RATE_LIMITED. */
  charge(credential: RateLimitedCredential, id: string): void {
    const key = `${credential}:${id}`;
    const taken = this.buckets[credential].take(id);
    if (taken.allowed) {
      if (this.refusing.size > 0) this.refusing.delete(key);
      return;
    }
    this.refusals.inc({ credential });
    if (!this.refusing.has(key)) {
      if (this.refusing.size >= this.maxRefusingKeys) this.refusing.clear();
      this.refusing.add(key);
      this.logger.warn({ credential, id, policy: this.policies[credential] }, 'rate limit reached');
    }
    const retryAfterSeconds = Math.max(1, Math.ceil(taken.retryAfterMs / 1000));
    throw new RateLimitedError(credential, retryAfterSeconds, this.policies[credential]);
  }

  /** Charges each execution of the given tokens once; invalid tokens are left to be refused later. */
  async chargeExecutions(
    tokens: Iterable<string | undefined>,
    executionOf: (token: string) => Promise<string | null>,
  ): Promise<void> {
    const executions = new Set<string>();
    for (const token of new Set(tokens)) {
      const execution = token ? await executionOf(token) : null;
      if (execution) executions.add(execution);
    }
    for (const execution of executions) this.charge('execution', execution);
  }
}

/** The API key authenticator that charges each request it recognises to the key's application. */
export class RateLimitedAuthenticator extends ApiKeyAuthenticator {
  constructor(
    store: IdentityStore,
    clock: Clock,
    cacheTtlMs: number,
    private readonly limits: RateLimits,
  ) {
    super(store, clock, cacheTtlMs);
  }

  override async authenticate(plaintextKey: string): Promise<ApplicationPrincipal | null> {
    const principal = await super.authenticate(plaintextKey);
    if (principal) this.limits.charge('application', principal.applicationId);
    return principal;
  }
}

/** User tokens whose requests are charged to the application that minted them. */
export function rateLimitedUserTokens(tokens: UserTokens, limits: RateLimits): UserTokens {
  return {
    sign: (principal, expiresAt) => tokens.sign(principal, expiresAt),
    verify: async (token, now): Promise<UserPrincipal | null> => {
      const principal = await tokens.verify(token, now);
      if (principal) limits.charge('application', principal.applicationId);
      return principal;
    },
  };
}

const RateLimitedResponse = {
  // As every error: problem+json on the wire, so documented as that (a bare schema reads as application/json).
  content: { 'application/problem+json': { schema: Type.Ref('Problem') } },
  description: 'RATE_LIMITED: the credential used up its requests; nothing was done',
  headers: {
    'retry-after': { type: 'integer', description: 'Seconds until a request can be accepted again' },
    ratelimit: {
      type: 'string',
      description: 'draft-ietf-httpapi-ratelimit-headers: `"<credential>";r=0;t=<s>`',
    },
    'ratelimit-policy': {
      type: 'string',
      description: 'draft-ietf-httpapi-ratelimit-headers: `"<credential>";q=<burst>;w=<s>`',
    },
  },
};

/** Every `/v1/` route takes a rate-limited credential, so each one documents the 429 (register first). */
export function documentRateLimits(app: FastifyInstance): void {
  app.addHook('onRoute', (route) => {
    if (!route.url.startsWith('/v1/') || !route.schema || route.schema.hide) return;
    route.schema.response = { ...(route.schema.response as object | undefined), 429: RateLimitedResponse };
  });
}

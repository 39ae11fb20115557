/**
 * What every status route shares: its deps, who is calling (an API key, a user token or an execution
 * token), and the OpenAPI tags.
 */
import type { FastifyRequest } from 'fastify';
import type { ApiKeyAuthenticator } from '../../../core/identity/authenticate.ts';
import type { ApplicationPrincipal } from '../../../core/identity/ports.ts';
import { AppError } from '../../../core/shared/errors.ts';
import type { StatusDeps } from '../../../core/status/deps.ts';
import type { UserPrincipal, UserTokens } from '../../../core/status/ports.ts';
import type { ReadDeps, Reader } from '../../../core/status/reads.ts';
import type { RateLimits } from './rateLimits.ts';

export interface StatusRouteDeps {
  authenticator: ApiKeyAuthenticator;
  status: StatusDeps;
  reads: ReadDeps;
  userTokens: UserTokens;
  /** Requests with an execution token are charged to its execution (API keys: by the authenticator). */
  rateLimits: RateLimits;
}

export type Caller =
  | { kind: 'application'; principal: ApplicationPrincipal }
  | { kind: 'user'; principal: UserPrincipal }
  | { kind: 'token'; token: string };

function bearer(request: FastifyRequest): string | null {
  const match = /^Bearer\s+(\S+)$/i.exec(request.headers.authorization ?? '');
  return match?.[1] ?? null;
}

export const unauthenticated = (request: FastifyRequest, detail: string) =>
  new AppError('UNAUTHENTICATED', `${detail} (${request.method} ${request.url.split('?')[0]})`);

export const security = [{ apiKey: [] }];
/** The /v1/me/* reads. */
export const userSecurity = [{ userToken: [] }];
/** Reporting: an execution token, or the API key (with an executionHandle, or coordinator events). */
export const reportSecurity: Record<string, string[]>[] = [{ executionToken: [] }, { apiKey: [] }];
export const tags = ['status'];

export interface StatusCallers {
  /** Who sent the request; null without a bearer token. */
  caller(request: FastifyRequest): Promise<Caller | null>;
  /** Who a bearer token is (any transport); `where` names the request in a refusal. */
  callerOf(token: string | null, where: string): Promise<Caller | null>;
  /** The application of the API key (401 otherwise). */
  application(request: FastifyRequest): Promise<ApplicationPrincipal>;
  /** An application or a user (401 otherwise). */
  reader(request: FastifyRequest): Promise<Reader>;
  /**
   * Charges the executions of the execution tokens sent in a body (429 RATE_LIMITED when one is used
   * up), but not the caller's own token again: `caller` charged it already.
   */
  chargeExecutions(tokens: (string | undefined)[], who: Caller | null): Promise<void>;
}

export function statusCallers(deps: StatusRouteDeps): StatusCallers {
  /** API keys start with `tdp_`; anything else is a token (a user token first, then an execution token). */
  const caller = (request: FastifyRequest) =>
    callerOf(bearer(request), `${request.method} ${request.url.split('?')[0]}`);

  async function callerOf(token: string | null, where: string): Promise<Caller | null> {
    if (!token) return null;
    if (token.startsWith('tdp_')) {
      const principal = await deps.authenticator.authenticate(token);
      if (!principal) throw new AppError('UNAUTHENTICATED', `the API key is not valid (${where})`);
      return { kind: 'application', principal };
    }
    const user = await deps.userTokens.verify(token, deps.status.clock.now());
    if (user) return { kind: 'user', principal: user };
    await chargeExecutions([token], null);
    return { kind: 'token', token };
  }

  async function chargeExecutions(tokens: (string | undefined)[], who: Caller | null): Promise<void> {
    const charged = who?.kind === 'token' ? who.token : undefined;
    const others = tokens.filter((token) => token !== charged);
    await deps.rateLimits.chargeExecutions(others, async (token) => {
      const claims = await deps.status.credentials.verify(token, deps.status.clock.now());
      return claims?.executionId ?? null;
    });
  }

  async function application(request: FastifyRequest): Promise<ApplicationPrincipal> {
    const who = await caller(request);
    if (who?.kind !== 'application')
      throw unauthenticated(request, 'send your API key as "Authorization: Bearer <key>"');
    return who.principal;
  }

  async function reader(request: FastifyRequest): Promise<Reader> {
    const who = await caller(request);
    if (who?.kind === 'application' || who?.kind === 'user') return who.principal;
    throw unauthenticated(request, 'send an API key or a user token');
  }

  return { caller, callerOf, application, reader, chargeExecutions };
}

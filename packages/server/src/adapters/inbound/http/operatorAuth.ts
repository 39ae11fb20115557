/**
 * Operators on the HTTP API: who is asking (a personal token, the bootstrap admin token while it is
 * on, or a dashboard session) and whether their roles allow the route. Every operator route declares
 * the least role it needs and where: `platform` (workers, nodes, dead letters, operators: a
 * platform-wide binding) or `tenants` (a binding anywhere; the handler then checks the tenant of what
 * it touches with `requireTenantRole`, and lists only what `reachOf` reaches).
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { OperatorActor } from '../../../core/facts/records.ts';
import { tokensEqual } from '../../../core/identity/apiKeys.ts';
import {
  actorOf,
  allows,
  bootstrapPrincipal,
  holdsSomewhere,
  type OperatorPrincipal,
  type OperatorRole,
  tenantReach,
} from '../../../core/identity/operatorAccess.ts';
import { authenticateOperatorToken, type OperatorTokenDeps } from '../../../core/identity/operatorTokens.ts';
import { AppError } from '../../../core/shared/errors.ts';
import { bearerToken } from './auth.ts';
import { problem, sendProblem } from './problems.ts';

declare module 'fastify' {
  interface FastifyRequest {
    operator?: OperatorPrincipal;
  }
}

/** Finds the operator a request presents; null when it presents none, or one that opens nothing. */
export type OperatorAuthenticate = (request: FastifyRequest) => Promise<OperatorPrincipal | null>;

/** The admin API's credentials: a personal token, or the bootstrap admin token while it is on. */
export function bearerOperators(deps: {
  bootstrapToken: string | null;
  tokens: Pick<OperatorTokenDeps, 'tokens' | 'clock'>;
}): OperatorAuthenticate {
  return async (request) => {
    const token = bearerToken(request);
    if (!token) return null;
    if (deps.bootstrapToken !== null && tokensEqual(token, deps.bootstrapToken)) return bootstrapPrincipal;
    return authenticateOperatorToken(deps.tokens, token);
  };
}

export type OperatorScope = 'platform' | 'tenants';

/** An operator route's gate: the least role it needs, platform-wide or in some tenant. */
export type OperatorGate = (
  least: OperatorRole,
  where: OperatorScope,
) => (request: FastifyRequest, reply: FastifyReply) => Promise<unknown>;

/**
 * The route's gate: a known operator (401 otherwise) holding at least `least` platform-wide, or in some
 * tenant (403 otherwise).
 */
export function requireOperator(
  authenticate: OperatorAuthenticate,
  least: OperatorRole,
  where: OperatorScope,
) {
  return async (request: FastifyRequest, reply: FastifyReply) => {
    const principal = await authenticate(request);
    if (!principal)
      return sendProblem(
        reply.header('www-authenticate', 'Bearer'),
        problem(
          'UNAUTHENTICATED',
          'send an operator token (or the bootstrap admin token) as "Authorization: Bearer <token>"',
          undefined,
          request.url,
        ),
      );
    admit(request, principal, least, where);
  };
}

/** Lets the principal through a gate that needs `least` where said (403 otherwise, counted). */
export function admit(
  request: FastifyRequest,
  principal: OperatorPrincipal,
  least: OperatorRole,
  where: OperatorScope,
): void {
  const allowed =
    where === 'platform' ? allows(principal, least, 'platform') : holdsSomewhere(principal, least);
  if (!allowed) throw refused(request, roleTooLow(least, where));
  request.operator = principal;
}

export const roleTooLow = (least: OperatorRole, where: OperatorScope) =>
  new AppError(
    'FORBIDDEN',
    where === 'platform'
      ? `this needs the ${least} role for the whole platform`
      : `this needs the ${least} role for the tenant`,
  );

/** Marks the request as refused for its roles (the failed-auth throttle counts it), and gives the error. */
export function refused(request: FastifyRequest, error: AppError): AppError {
  request.accessRefused = true;
  return error;
}

/** The operator of a request that passed `requireOperator`. */
export function operatorOf(request: FastifyRequest): OperatorPrincipal {
  if (!request.operator) throw new Error('route is missing requireOperator');
  return request.operator;
}

export const actorOfRequest = (request: FastifyRequest): OperatorActor => actorOf(operatorOf(request));

/** The tenants the request's operator reaches with at least `least`. */
export const reachOf = (request: FastifyRequest, least: OperatorRole = 'viewer') =>
  tenantReach(operatorOf(request), least);

/**
 * Lets the request act on a resource of `tenantId` with at least `least`: one the operator cannot even
 * see is `missing` (its not-found: whether it exists is not told), one they see with too low a role is
 * 403.
 */
export function requireTenantRole(
  request: FastifyRequest,
  least: OperatorRole,
  tenantId: string,
  missing: () => AppError,
): void {
  const principal = operatorOf(request);
  if (allows(principal, least, { tenantId })) return;
  if (allows(principal, 'viewer', { tenantId })) throw refused(request, roleTooLow(least, 'tenants'));
  throw refused(request, missing());
}

/** Whether a tenant's resource is one the operator may see (lists leave the others out). */
export const seesTenant = (reach: 'all' | string[], tenantId: string) =>
  reach === 'all' || reach.includes(tenantId);

/**
 * Lets the request act on task `taskId` with at least `least`: a task of a tenant the operator cannot
 * see is TASK_NOT_FOUND, as a task that does not exist. A platform-wide operator needs no look-up.
 */
export async function requireTaskRole(
  request: FastifyRequest,
  least: OperatorRole,
  taskId: string,
  tenantOf: (taskId: string) => Promise<string | null>,
): Promise<void> {
  if (allows(operatorOf(request), least, 'platform')) return;
  const missing = () => new AppError('TASK_NOT_FOUND', `task ${taskId} does not exist`);
  const tenantId = await tenantOf(taskId);
  if (!tenantId) throw missing();
  requireTenantRole(request, least, tenantId, missing);
}

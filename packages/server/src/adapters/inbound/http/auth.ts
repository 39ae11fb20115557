import type { FastifyReply, FastifyRequest } from 'fastify';
import type { ApiKeyAuthenticator } from '../../../core/identity/authenticate.ts';
import type { ApplicationPrincipal } from '../../../core/identity/ports.ts';
import { problem, sendProblem } from './problems.ts';

declare module 'fastify' {
  interface FastifyRequest {
    principal?: ApplicationPrincipal;
  }
}

/** The bearer token of the request's Authorization header, or null. */
export function bearerToken(request: FastifyRequest): string | null {
  const header = request.headers.authorization;
  if (!header) return null;
  const match = /^Bearer\s+(\S+)$/i.exec(header);
  return match?.[1] ?? null;
}

export function requireApplication(authenticator: ApiKeyAuthenticator) {
  return async (request: FastifyRequest, reply: FastifyReply) => {
    const token = bearerToken(request);
    const principal = token ? await authenticator.authenticate(token) : null;
    if (!principal) {
      return sendProblem(
        reply.header('www-authenticate', 'Bearer'),
        problem(
          'UNAUTHENTICATED',
          'send a valid API key as "Authorization: Bearer <key>"',
          undefined,
          request.url,
        ),
      );
    }
    request.principal = principal;
  };
}

/** The authenticated application of a request that passed `requireApplication`. */
export function principalOf(request: FastifyRequest): ApplicationPrincipal {
  if (!request.principal) throw new Error('route is missing requireApplication');
  return request.principal;
}

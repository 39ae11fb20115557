/**
 * Broadcasts (docs/realtime.md, "Broadcasts"): an application's API key sends a notice to its own
 * tenant's people; the admin token to any tenant's, or to everyone. Each is audited and published by the
 * relay; the answer (202) comes once it is committed. An Idempotency-Key is optional: a retry with it and
 * the same body gets the first answer (with `idempotent-replayed: true`) and sends nothing more.
 */
import type { FastifyInstance, FastifyReply } from 'fastify';
import { Type } from 'typebox';
import type { ApiKeyAuthenticator } from '../../../core/identity/authenticate.ts';
import {
  type BroadcastDeps,
  type BroadcastResult,
  broadcastToEveryone,
  broadcastToTenant,
  type SystemNotice,
  type TenantNotice,
} from '../../../core/realtime/broadcasts.ts';
import { AppError } from '../../../core/shared/errors.ts';
import { principalOf, requireApplication } from './auth.ts';
import { actorOfRequest, type OperatorGate, requireTenantRole } from './operatorAuth.ts';
import { problemResponses, Uuid } from './schemas.ts';

const Severity = Type.Union([Type.Literal('INFO'), Type.Literal('WARNING'), Type.Literal('CRITICAL')]);
/** The wider the scope, the less it says: a system notice is one short line. */
const TenantNoticeBody = Type.Object(
  {
    title: Type.String({ minLength: 1, maxLength: 120 }),
    message: Type.String({ minLength: 1, maxLength: 1000 }),
    severity: Severity,
    link: Type.Optional(
      Type.String({ maxLength: 2048, pattern: '^https?://[^\\s]+$', description: 'An http(s) URL' }),
    ),
  },
  { additionalProperties: false },
);
const SystemNoticeBody = Type.Object(
  { message: Type.String({ minLength: 1, maxLength: 280 }), severity: Severity },
  { additionalProperties: false },
);
const Accepted = Type.Object({ id: Type.String(), channel: Type.String(), sentAt: Type.String() });
/** Optional here: a notice sent twice is a nuisance, not a second task, so no key is still accepted. */
const IdempotencyKey = Type.Object({
  'idempotency-key': Type.Optional(
    Type.String({
      minLength: 1,
      maxLength: 255,
      description:
        'Optional. A retry with the same key and body gets the first answer and sends nothing; another body is 409.',
    }),
  ),
});
type Headers = { 'idempotency-key'?: string };
const accepted = (reply: FastifyReply, result: BroadcastResult) => {
  if (result.replayed) reply.header('idempotent-replayed', 'true');
  return reply.code(202).send(result.answer);
};

export function registerBroadcastRoutes(
  app: FastifyInstance,
  deps: { gate: OperatorGate; authenticator: ApiKeyAuthenticator; broadcasts: BroadcastDeps },
): void {
  const admin = { tags: ['admin'], security: [{ adminToken: [] }] };

  app.post<{ Body: TenantNotice; Headers: Headers }>(
    '/v1/broadcasts',
    {
      onRequest: requireApplication(deps.authenticator),
      schema: {
        tags: ['realtime'],
        security: [{ apiKey: [] }],
        summary: "A notice to every person of the application's tenant (channel task_tenant:{tenant})",
        headers: IdempotencyKey,
        body: TenantNoticeBody,
        response: { 202: Accepted, ...problemResponses },
      },
    },
    async (request, reply) => {
      const caller = principalOf(request);
      const sent = await broadcastToTenant(deps.broadcasts, {
        tenantId: caller.tenantId,
        notice: request.body,
        actor: { application: caller.applicationId },
        ...idempotencyKeyOf(request.headers),
      });
      return accepted(reply, sent);
    },
  );

  app.post<{ Params: { tenantId: string }; Body: TenantNotice; Headers: Headers }>(
    '/admin/v1/tenants/:tenantId/broadcasts',
    {
      onRequest: deps.gate('operator', 'tenants'),
      schema: {
        ...admin,
        summary:
          "A notice to every person of the tenant (channel task_tenant:{tenant}; the tenant's operator role; audited)",
        params: Type.Object({ tenantId: Uuid }),
        headers: IdempotencyKey,
        body: TenantNoticeBody,
        response: { 202: Accepted, ...problemResponses },
      },
    },
    async (request, reply) => {
      const { tenantId } = request.params;
      requireTenantRole(
        request,
        'operator',
        tenantId,
        () => new AppError('TENANT_NOT_FOUND', `tenant ${tenantId} does not exist`),
      );
      const sent = await broadcastToTenant(deps.broadcasts, {
        tenantId,
        notice: request.body,
        actor: { operator: actorOfRequest(request) },
        ...idempotencyKeyOf(request.headers),
      });
      return accepted(reply, sent);
    },
  );

  app.post<{ Body: SystemNotice; Headers: Headers }>(
    '/admin/v1/broadcasts',
    {
      onRequest: deps.gate('operator', 'platform'),
      schema: {
        ...admin,
        summary: 'A notice to everyone (channel task_system:public; a platform-wide operator; audited)',
        headers: IdempotencyKey,
        body: SystemNoticeBody,
        response: { 202: Accepted, ...problemResponses },
      },
    },
    async (request, reply) => {
      const sent = await broadcastToEveryone(deps.broadcasts, {
        notice: request.body,
        actor: { operator: actorOfRequest(request) },
        ...idempotencyKeyOf(request.headers),
      });
      return accepted(reply, sent);
    },
  );
}

const idempotencyKeyOf = (headers: Headers) =>
  headers['idempotency-key'] ? { idempotencyKey: headers['idempotency-key'] } : {};

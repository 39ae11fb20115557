/**
 * Broadcasts (docs/realtime.md, "Broadcasts"): an application's API key sends a notice to its own
 * tenant's people; the admin token to any tenant's, or to everyone. Each is audited and published by the
 * relay; the answer (202) comes once it is committed.
 */
import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import type { ApiKeyAuthenticator } from '../../../core/identity/authenticate.ts';
import {
  type BroadcastDeps,
  type BroadcastRecord,
  broadcastToEveryone,
  broadcastToTenant,
  type SystemNotice,
  type TenantNotice,
} from '../../../core/realtime/broadcasts.ts';
import { principalOf, requireAdmin, requireApplication } from './auth.ts';
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
const accepted = (b: BroadcastRecord) => ({
  id: b.id,
  channel: b.channel,
  sentAt: b.createdAt.toISOString(),
});

export function registerBroadcastRoutes(
  app: FastifyInstance,
  deps: { adminToken: string; authenticator: ApiKeyAuthenticator; broadcasts: BroadcastDeps },
): void {
  const admin = { tags: ['admin'], security: [{ adminToken: [] }] };

  app.post<{ Body: TenantNotice }>(
    '/v1/broadcasts',
    {
      onRequest: requireApplication(deps.authenticator),
      schema: {
        tags: ['realtime'],
        security: [{ apiKey: [] }],
        summary: "A notice to every person of the application's tenant (channel task_tenant:{tenant})",
        body: TenantNoticeBody,
        response: { 202: Accepted, ...problemResponses },
      },
    },
    async (request, reply) => {
      const caller = principalOf(request);
      const sent = await broadcastToTenant(deps.broadcasts, {
        tenantId: caller.tenantId,
        notice: request.body,
        actor: `application:${caller.applicationId}`,
      });
      return reply.code(202).send(accepted(sent));
    },
  );

  app.post<{ Params: { tenantId: string }; Body: TenantNotice }>(
    '/admin/v1/tenants/:tenantId/broadcasts',
    {
      onRequest: requireAdmin(deps.adminToken),
      schema: {
        ...admin,
        summary: 'A notice to every person of the tenant (channel task_tenant:{tenant})',
        params: Type.Object({ tenantId: Uuid }),
        body: TenantNoticeBody,
        response: { 202: Accepted, ...problemResponses },
      },
    },
    async (request, reply) => {
      const sent = await broadcastToTenant(deps.broadcasts, {
        tenantId: request.params.tenantId,
        notice: request.body,
        actor: 'operator',
      });
      return reply.code(202).send(accepted(sent));
    },
  );

  app.post<{ Body: SystemNotice }>(
    '/admin/v1/broadcasts',
    {
      onRequest: requireAdmin(deps.adminToken),
      schema: {
        ...admin,
        summary: 'A notice to everyone (channel task_system:public)',
        body: SystemNoticeBody,
        response: { 202: Accepted, ...problemResponses },
      },
    },
    async (request, reply) => {
      const sent = await broadcastToEveryone(deps.broadcasts, { notice: request.body, actor: 'operator' });
      return reply.code(202).send(accepted(sent));
    },
  );
}

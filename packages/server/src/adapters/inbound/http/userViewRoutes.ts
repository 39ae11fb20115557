/**
 * The tenant's user-view setting (core/identity/userReach.ts): which of its applications may show a user
 * all their tasks across the tenant. Every change is audited; the audit comes back with the setting.
 */
import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import type { ApiKeyAuthenticator } from '../../../core/identity/authenticate.ts';
import type { IdentityAuditRecord, IdentityStore } from '../../../core/identity/ports.ts';
import { setTenantWideApplications, tenantUserView } from '../../../core/identity/tenants.ts';
import { AppError } from '../../../core/shared/errors.ts';
import type { Clock, IdGenerator } from '../../../core/shared/ports.ts';
import { actorOfRequest, type OperatorGate, requireTenantRole } from './operatorAuth.ts';
import { problemResponses, Uuid } from './schemas.ts';

const ApplicationIds = Type.Array(Uuid, { maxItems: 1000, uniqueItems: true });
const UserViewSetting = Type.Object({
  tenantWideApplicationIds: ApplicationIds,
  audit: Type.Array(
    Type.Object({
      id: Type.String(),
      actor: Type.String(),
      before: Type.Object({ tenantWideApplicationIds: Type.Array(Type.String()) }),
      after: Type.Object({ tenantWideApplicationIds: Type.Array(Type.String()) }),
      at: Type.String({ format: 'date-time' }),
    }),
  ),
});

const view = (setting: { tenantWideApplicationIds: string[]; audit: IdentityAuditRecord[] }) => ({
  tenantWideApplicationIds: setting.tenantWideApplicationIds,
  audit: setting.audit.map((a) => ({
    id: a.id,
    actor: a.actor,
    before: a.before,
    after: a.after,
    at: a.createdAt.toISOString(),
  })),
});

export function registerUserViewRoutes(
  app: FastifyInstance,
  deps: {
    gate: OperatorGate;
    identity: { store: IdentityStore; clock: Clock; ids: IdGenerator };
    authenticator: ApiKeyAuthenticator;
  },
): void {
  const tenant = (tenantId: string) => () =>
    new AppError('TENANT_NOT_FOUND', `tenant ${tenantId} does not exist`);
  const security = [{ adminToken: [] }];
  const tags = ['admin'];
  const params = Type.Object({ tenantId: Uuid });

  app.get<{ Params: { tenantId: string } }>(
    '/admin/v1/tenants/:tenantId/user-view',
    {
      onRequest: deps.gate('viewer', 'tenants'),
      schema: {
        tags,
        security,
        summary: 'Which applications of the tenant show a user all their tasks of the tenant, and the audit',
        params,
        response: { 200: UserViewSetting, ...problemResponses },
      },
    },
    async (request) => {
      requireTenantRole(request, 'viewer', request.params.tenantId, tenant(request.params.tenantId));
      return view(await tenantUserView(deps.identity, request.params.tenantId));
    },
  );

  app.put<{ Params: { tenantId: string }; Body: { tenantWideApplicationIds: string[] } }>(
    '/admin/v1/tenants/:tenantId/user-view',
    {
      onRequest: deps.gate('admin', 'tenants'),
      schema: {
        tags,
        security,
        summary:
          'Name the applications whose tokens show a user all their tasks of the tenant (the others: only their own); audited',
        description:
          'Tokens carry the view they were minted with: the change reaches tokens minted after it. Reads by API key stay per application.',
        params,
        body: Type.Object({ tenantWideApplicationIds: ApplicationIds }, { additionalProperties: false }),
        response: { 200: UserViewSetting, ...problemResponses },
      },
    },
    async (request) => {
      requireTenantRole(request, 'admin', request.params.tenantId, tenant(request.params.tenantId));
      const setting = await setTenantWideApplications(
        deps.identity,
        request.params.tenantId,
        request.body.tenantWideApplicationIds,
        actorOfRequest(request),
      );
      // Cached keys carry the old view.
      deps.authenticator.forget();
      return view(setting);
    },
  );
}

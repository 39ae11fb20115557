import type { FastifyInstance, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import type { JsonSchemaValidator, RegistryStore } from '../../../core/definitions/ports.ts';
import {
  type ApplicationDeps,
  createApplication,
  revokeApiKey,
  rotateApiKey,
  rotateCallbackSecret,
  updateResourceProvider,
} from '../../../core/identity/applications.ts';
import type { ApiKeyAuthenticator } from '../../../core/identity/authenticate.ts';
import type { OperatorRole } from '../../../core/identity/operatorAccess.ts';
import type { Application, Revocations } from '../../../core/identity/ports.ts';
import { createTenant } from '../../../core/identity/tenants.ts';
import { AppError } from '../../../core/shared/errors.ts';
import type { Clock } from '../../../core/shared/ports.ts';
import { actorOfRequest, type OperatorGate, reachOf, requireTenantRole, seesTenant } from './operatorAuth.ts';
import { registerRegistryAdminRoutes } from './registryAdminRoutes.ts';
import { emptyBodyAsObject, problemResponses, Uuid } from './schemas.ts';

const Timestamp = Type.String({ format: 'date-time' });
const TenantView = Type.Object({ id: Type.String(), name: Type.String(), createdAt: Timestamp });
const ApiKeyView = Type.Object({
  id: Type.String(),
  label: Type.Union([Type.String(), Type.Null()]),
  createdAt: Timestamp,
  expiresAt: Type.Union([Timestamp, Type.Null()]),
  revokedAt: Type.Union([Timestamp, Type.Null()]),
});
const ApplicationView = Type.Object({
  id: Type.String(),
  tenantId: Type.String(),
  name: Type.String(),
  resourceProviderUrl: Type.Union([Type.String(), Type.Null()]),
  hasResourceProviderToken: Type.Boolean(),
  callbackSecretRotating: Type.Boolean(),
  userView: Type.Union([Type.Literal('APPLICATION'), Type.Literal('TENANT')], {
    description: "What its tokens show a user: its own tasks, or (named by the tenant) all of the tenant's",
  }),
  createdAt: Timestamp,
  updatedAt: Timestamp,
});
const IssuedKey = Type.Object({
  id: Type.String(),
  key: Type.String({ description: 'Shown once; only its hash is stored.' }),
  createdAt: Timestamp,
});
const ResourceProvider = Type.Object(
  {
    url: Type.String({ minLength: 1, maxLength: 2048 }),
    bearerToken: Type.String({ minLength: 1, maxLength: 4096 }),
  },
  { additionalProperties: false },
);

function applicationView(a: Application, now: Date) {
  return {
    id: a.id,
    tenantId: a.tenantId,
    name: a.name,
    resourceProviderUrl: a.resourceProviderUrl,
    hasResourceProviderToken: a.resourceProviderTokenSealed !== null,
    callbackSecretRotating:
      a.previousCallbackSecretExpiresAt !== null && a.previousCallbackSecretExpiresAt > now,
    userView: a.userView,
    createdAt: a.createdAt.toISOString(),
    updatedAt: a.updatedAt.toISOString(),
  };
}

const iso = (d: Date | null) => d?.toISOString() ?? null;

export function registerAdminRoutes(
  app: FastifyInstance,
  deps: {
    gate: OperatorGate;
    applications: ApplicationDeps;
    authenticator: ApiKeyAuthenticator;
    /** A revoked key is forgotten by every replica, and the tokens it minted stop working at once. */
    revocations: Pick<Revocations, 'announce'>;
    registries: { registries: RegistryStore; clock: Clock; schemas: JsonSchemaValidator };
  },
): void {
  // Tenants are created platform-wide; a tenant's applications and keys by its admins; reads by anyone
  // who sees the tenant.
  const viewers = deps.gate('viewer', 'tenants');
  const admins = deps.gate('admin', 'tenants');
  const security = [{ adminToken: [] }];
  const tags = ['admin'];
  const { store, clock } = deps.applications;

  /** The application, if the operator holds `least` in its tenant (one they cannot see does not exist). */
  const applicationFor = async (request: FastifyRequest, id: string, least: OperatorRole) => {
    const application = await store.getApplication(id);
    const missing = () => new AppError('APPLICATION_NOT_FOUND', `application ${id} does not exist`);
    if (!application) throw missing();
    requireTenantRole(request, least, application.tenantId, missing);
    return application;
  };
  const tenantFor = (request: FastifyRequest, tenantId: string, least: OperatorRole) =>
    requireTenantRole(
      request,
      least,
      tenantId,
      () => new AppError('TENANT_NOT_FOUND', `tenant ${tenantId} does not exist`),
    );
  app.post<{ Body: { name: string } }>(
    '/admin/v1/tenants',
    {
      onRequest: deps.gate('admin', 'platform'),
      schema: {
        tags,
        security,
        summary: 'Create a tenant (platform-wide admin; audited)',
        body: Type.Object(
          { name: Type.String({ minLength: 1, maxLength: 200 }) },
          { additionalProperties: false },
        ),
        response: { 201: TenantView, ...problemResponses },
      },
    },
    async (request, reply) => {
      const tenant = await createTenant(deps.applications, request.body.name, actorOfRequest(request));
      return reply.code(201).send({ ...tenant, createdAt: tenant.createdAt.toISOString() });
    },
  );

  app.get(
    '/admin/v1/tenants',
    {
      onRequest: viewers,
      schema: {
        tags,
        security,
        summary: 'List the tenants the caller sees',
        response: { 200: Type.Array(TenantView) },
      },
    },
    async (request) => {
      const reach = reachOf(request);
      return (await store.listTenants())
        .filter((t) => seesTenant(reach, t.id))
        .map((t) => ({ ...t, createdAt: t.createdAt.toISOString() }));
    },
  );

  app.post<{
    Params: { tenantId: string };
    Body: { name: string; resourceProvider?: { url: string; bearerToken: string } };
  }>(
    '/admin/v1/tenants/:tenantId/applications',
    {
      onRequest: admins,
      schema: {
        tags,
        security,
        summary: 'Create an application with its first API key and callback signing secret',
        description: 'The API key and the callback secret are in this answer only.',
        params: Type.Object({ tenantId: Uuid }),
        body: Type.Object(
          {
            name: Type.String({ minLength: 1, maxLength: 200 }),
            resourceProvider: Type.Optional(ResourceProvider),
          },
          { additionalProperties: false },
        ),
        response: {
          201: Type.Object({
            application: ApplicationView,
            apiKey: IssuedKey,
            callbackSecret: Type.String(),
          }),
          ...problemResponses,
        },
      },
    },
    async (request, reply) => {
      tenantFor(request, request.params.tenantId, 'admin');
      const created = await createApplication(
        deps.applications,
        {
          tenantId: request.params.tenantId,
          name: request.body.name,
          ...(request.body.resourceProvider ? { resourceProvider: request.body.resourceProvider } : {}),
        },
        actorOfRequest(request),
      );
      return reply.code(201).send({
        application: applicationView(created.application, clock.now()),
        apiKey: { ...created.apiKey, createdAt: created.apiKey.createdAt.toISOString() },
        callbackSecret: created.callbackSecret,
      });
    },
  );

  app.get<{ Params: { tenantId: string } }>(
    '/admin/v1/tenants/:tenantId/applications',
    {
      onRequest: viewers,
      schema: {
        tags,
        security,
        summary: "List a tenant's applications",
        params: Type.Object({ tenantId: Uuid }),
        response: { 200: Type.Array(ApplicationView), ...problemResponses },
      },
    },
    async (request) => {
      tenantFor(request, request.params.tenantId, 'viewer');
      return (await store.listApplications(request.params.tenantId)).map((a) =>
        applicationView(a, clock.now()),
      );
    },
  );

  app.get<{ Params: { id: string } }>(
    '/admin/v1/applications/:id',
    {
      onRequest: viewers,
      schema: {
        tags,
        security,
        summary: 'Read an application and its API keys (never their secrets)',
        params: Type.Object({ id: Uuid }),
        response: {
          200: Type.Object({ application: ApplicationView, apiKeys: Type.Array(ApiKeyView) }),
          ...problemResponses,
        },
      },
    },
    async (request) => {
      const application = await applicationFor(request, request.params.id, 'viewer');
      const keys = await store.listApiKeys(application.id);
      return {
        application: applicationView(application, clock.now()),
        apiKeys: keys.map((k) => ({
          id: k.id,
          label: k.label,
          createdAt: k.createdAt.toISOString(),
          expiresAt: iso(k.expiresAt),
          revokedAt: iso(k.revokedAt),
        })),
      };
    },
  );

  app.put<{ Params: { id: string }; Body: { url: string; bearerToken: string } | null }>(
    '/admin/v1/applications/:id/resource-provider',
    {
      onRequest: admins,
      schema: {
        tags,
        security,
        summary: "Set the application's resource provider (the bearer token is encrypted at rest)",
        params: Type.Object({ id: Uuid }),
        body: ResourceProvider,
        response: { 200: ApplicationView, ...problemResponses },
      },
    },
    async (request) => {
      await applicationFor(request, request.params.id, 'admin');
      const updated = await updateResourceProvider(
        deps.applications,
        request.params.id,
        request.body,
        actorOfRequest(request),
      );
      return applicationView(updated, clock.now());
    },
  );

  app.post<{ Params: { id: string }; Body: { overlapSeconds?: number; label?: string } | undefined }>(
    '/admin/v1/applications/:id/api-keys',
    {
      onRequest: admins,
      preValidation: emptyBodyAsObject,
      schema: {
        tags,
        security,
        summary: 'Rotate: issue a new API key; older keys stay valid for the overlap',
        params: Type.Object({ id: Uuid }),
        body: Type.Object(
          {
            overlapSeconds: Type.Optional(
              Type.Integer({ minimum: 0, maximum: 30 * 86_400, default: 86_400 }),
            ),
            label: Type.Optional(Type.String({ maxLength: 200 })),
          },
          { additionalProperties: false },
        ),
        response: {
          201: Type.Object({ apiKey: IssuedKey, previousKeysExpireAt: Timestamp }),
          ...problemResponses,
        },
      },
    },
    async (request, reply) => {
      await applicationFor(request, request.params.id, 'admin');
      const result = await rotateApiKey(
        deps.applications,
        request.params.id,
        {
          overlapSeconds: request.body?.overlapSeconds ?? 86_400,
          label: request.body?.label ?? null,
        },
        actorOfRequest(request),
      );
      deps.authenticator.forget();
      return reply.code(201).send({
        apiKey: { ...result.apiKey, createdAt: result.apiKey.createdAt.toISOString() },
        previousKeysExpireAt: result.previousKeysExpireAt.toISOString(),
      });
    },
  );

  app.delete<{ Params: { id: string; keyId: string } }>(
    '/admin/v1/applications/:id/api-keys/:keyId',
    {
      onRequest: admins,
      schema: {
        tags,
        security,
        summary: 'Revoke an API key now',
        params: Type.Object({ id: Uuid, keyId: Type.String({ minLength: 1, maxLength: 64 }) }),
        response: { 204: Type.Null(), ...problemResponses },
      },
    },
    async (request, reply) => {
      await applicationFor(request, request.params.id, 'admin');
      await revokeApiKey(deps.applications, request.params.id, request.params.keyId, actorOfRequest(request));
      await deps.revocations.announce({ kind: 'apiKey', keyId: request.params.keyId });
      return reply.code(204).send();
    },
  );

  app.post<{ Params: { id: string }; Body: { overlapSeconds?: number } | undefined }>(
    '/admin/v1/applications/:id/callback-secret',
    {
      onRequest: admins,
      preValidation: emptyBodyAsObject,
      schema: {
        tags,
        security,
        summary: 'Rotate the callback signing secret; the previous one still signs during the overlap',
        params: Type.Object({ id: Uuid }),
        body: Type.Object(
          {
            overlapSeconds: Type.Optional(
              Type.Integer({ minimum: 0, maximum: 30 * 86_400, default: 86_400 }),
            ),
          },
          { additionalProperties: false },
        ),
        response: {
          201: Type.Object({ callbackSecret: Type.String(), previousSecretExpiresAt: Timestamp }),
          ...problemResponses,
        },
      },
    },
    async (request, reply) => {
      await applicationFor(request, request.params.id, 'admin');
      const result = await rotateCallbackSecret(
        deps.applications,
        request.params.id,
        request.body?.overlapSeconds ?? 86_400,
        actorOfRequest(request),
      );
      return reply.code(201).send({
        callbackSecret: result.callbackSecret,
        previousSecretExpiresAt: result.previousSecretExpiresAt.toISOString(),
      });
    },
  );

  registerRegistryAdminRoutes(app, {
    security,
    tags,
    viewers,
    admins,
    registries: deps.registries,
    applicationFor,
  });
}

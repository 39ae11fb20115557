import { OperationDefinitionRequest, StatusDefinitionRequest } from '@tdp/protocol';
import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import type { JsonSchemaValidator, RegistryStore } from '../../../core/definitions/ports.ts';
import { defineOperation, defineStatuses } from '../../../core/definitions/registries.ts';
import {
  type ApplicationDeps,
  createApplication,
  revokeApiKey,
  rotateApiKey,
  rotateCallbackSecret,
  updateResourceProvider,
} from '../../../core/identity/applications.ts';
import type { ApiKeyAuthenticator } from '../../../core/identity/authenticate.ts';
import type { Application, Revocations } from '../../../core/identity/ports.ts';
import { createTenant } from '../../../core/identity/tenants.ts';
import { AppError } from '../../../core/shared/errors.ts';
import type { Clock } from '../../../core/shared/ports.ts';
import { requireAdmin } from './auth.ts';
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
    adminToken: string;
    applications: ApplicationDeps;
    authenticator: ApiKeyAuthenticator;
    /** A revoked key is forgotten by every replica, and the tokens it minted stop working at once. */
    revocations: Pick<Revocations, 'announce'>;
    registries: { registries: RegistryStore; clock: Clock; schemas: JsonSchemaValidator };
  },
): void {
  const onRequest = requireAdmin(deps.adminToken);
  const security = [{ adminToken: [] }];
  const tags = ['admin'];
  const { store, clock } = deps.applications;

  const getApplication = async (id: string) => {
    const application = await store.getApplication(id);
    if (!application) throw new AppError('APPLICATION_NOT_FOUND', `application ${id} does not exist`);
    return application;
  };

  app.post<{ Body: { name: string } }>(
    '/admin/v1/tenants',
    {
      onRequest,
      schema: {
        tags,
        security,
        summary: 'Create a tenant',
        body: Type.Object(
          { name: Type.String({ minLength: 1, maxLength: 200 }) },
          { additionalProperties: false },
        ),
        response: { 201: TenantView, ...problemResponses },
      },
    },
    async (request, reply) => {
      const tenant = await createTenant(deps.applications, request.body.name);
      return reply.code(201).send({ ...tenant, createdAt: tenant.createdAt.toISOString() });
    },
  );

  app.get(
    '/admin/v1/tenants',
    {
      onRequest,
      schema: { tags, security, summary: 'List tenants', response: { 200: Type.Array(TenantView) } },
    },
    async () => (await store.listTenants()).map((t) => ({ ...t, createdAt: t.createdAt.toISOString() })),
  );

  app.post<{
    Params: { tenantId: string };
    Body: { name: string; resourceProvider?: { url: string; bearerToken: string } };
  }>(
    '/admin/v1/tenants/:tenantId/applications',
    {
      onRequest,
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
      const created = await createApplication(deps.applications, {
        tenantId: request.params.tenantId,
        name: request.body.name,
        ...(request.body.resourceProvider ? { resourceProvider: request.body.resourceProvider } : {}),
      });
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
      onRequest,
      schema: {
        tags,
        security,
        summary: "List a tenant's applications",
        params: Type.Object({ tenantId: Uuid }),
        response: { 200: Type.Array(ApplicationView), ...problemResponses },
      },
    },
    async (request) =>
      (await store.listApplications(request.params.tenantId)).map((a) => applicationView(a, clock.now())),
  );

  app.get<{ Params: { id: string } }>(
    '/admin/v1/applications/:id',
    {
      onRequest,
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
      const application = await getApplication(request.params.id);
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
      onRequest,
      schema: {
        tags,
        security,
        summary: "Set the application's resource provider (the bearer token is encrypted at rest)",
        params: Type.Object({ id: Uuid }),
        body: ResourceProvider,
        response: { 200: ApplicationView, ...problemResponses },
      },
    },
    async (request) =>
      applicationView(
        await updateResourceProvider(deps.applications, request.params.id, request.body),
        clock.now(),
      ),
  );

  app.post<{ Params: { id: string }; Body: { overlapSeconds?: number; label?: string } | undefined }>(
    '/admin/v1/applications/:id/api-keys',
    {
      onRequest,
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
      const result = await rotateApiKey(deps.applications, request.params.id, {
        overlapSeconds: request.body?.overlapSeconds ?? 86_400,
        label: request.body?.label ?? null,
      });
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
      onRequest,
      schema: {
        tags,
        security,
        summary: 'Revoke an API key now',
        params: Type.Object({ id: Uuid, keyId: Type.String({ minLength: 1, maxLength: 64 }) }),
        response: { 204: Type.Null(), ...problemResponses },
      },
    },
    async (request, reply) => {
      await revokeApiKey(deps.applications, request.params.id, request.params.keyId);
      await deps.revocations.announce({ kind: 'apiKey', keyId: request.params.keyId });
      return reply.code(204).send();
    },
  );

  app.post<{ Params: { id: string }; Body: { overlapSeconds?: number } | undefined }>(
    '/admin/v1/applications/:id/callback-secret',
    {
      onRequest,
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
      const result = await rotateCallbackSecret(
        deps.applications,
        request.params.id,
        request.body?.overlapSeconds ?? 86_400,
      );
      return reply.code(201).send({
        callbackSecret: result.callbackSecret,
        previousSecretExpiresAt: result.previousSecretExpiresAt.toISOString(),
      });
    },
  );

  app.post<{ Params: { id: string }; Body: StatusDefinitionRequest }>(
    '/admin/v1/applications/:id/status-definitions',
    {
      onRequest,
      schema: {
        tags,
        security,
        summary: 'Define a version of the business statuses of a task type (immutable once defined)',
        params: Type.Object({ id: Uuid }),
        body: StatusDefinitionRequest,
        response: {
          200: Type.Record(Type.String(), Type.Unknown()),
          201: Type.Record(Type.String(), Type.Unknown()),
          ...problemResponses,
        },
      },
    },
    async (request, reply) => {
      await getApplication(request.params.id);
      const { definition, created } = await defineStatuses(deps.registries, request.params.id, request.body);
      return reply
        .code(created ? 201 : 200)
        .send({ ...definition, createdAt: definition.createdAt.toISOString() });
    },
  );

  app.get<{ Params: { id: string } }>(
    '/admin/v1/applications/:id/status-definitions',
    {
      onRequest,
      schema: {
        tags,
        security,
        summary: 'List status definitions',
        params: Type.Object({ id: Uuid }),
        response: { 200: Type.Array(Type.Record(Type.String(), Type.Unknown())) },
      },
    },
    async (request) => {
      await getApplication(request.params.id);
      return (await deps.registries.registries.listStatusDefinitions(request.params.id)).map((d) => ({
        ...d,
        createdAt: d.createdAt.toISOString(),
      }));
    },
  );

  app.post<{ Params: { id: string }; Body: OperationDefinitionRequest }>(
    '/admin/v1/applications/:id/operation-definitions',
    {
      onRequest,
      schema: {
        tags,
        security,
        summary:
          'Define a version of an operation: producers, event types and the data schemas they may send',
        params: Type.Object({ id: Uuid }),
        body: OperationDefinitionRequest,
        response: {
          200: Type.Record(Type.String(), Type.Unknown()),
          201: Type.Record(Type.String(), Type.Unknown()),
          ...problemResponses,
        },
      },
    },
    async (request, reply) => {
      await getApplication(request.params.id);
      const { definition, created } = await defineOperation(deps.registries, request.params.id, request.body);
      return reply
        .code(created ? 201 : 200)
        .send({ ...definition, createdAt: definition.createdAt.toISOString() });
    },
  );

  app.get<{ Params: { id: string } }>(
    '/admin/v1/applications/:id/operation-definitions',
    {
      onRequest,
      schema: {
        tags,
        security,
        summary: 'List operation definitions',
        params: Type.Object({ id: Uuid }),
        response: { 200: Type.Array(Type.Record(Type.String(), Type.Unknown())) },
      },
    },
    async (request) => {
      await getApplication(request.params.id);
      return (await deps.registries.registries.listOperationDefinitions(request.params.id)).map((d) => ({
        ...d,
        createdAt: d.createdAt.toISOString(),
      }));
    },
  );
}

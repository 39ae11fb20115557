/**
 * An application's registries on the admin API: status definitions and operation definitions (the
 * tenant's admins define them, anyone who sees the tenant reads them; each new version audited).
 */
import { OperationDefinitionRequest, StatusDefinitionRequest } from '@tdp/protocol';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import type { JsonSchemaValidator, RegistryStore } from '../../../core/definitions/ports.ts';
import { defineOperation, defineStatuses } from '../../../core/definitions/registries.ts';
import type { OperatorRole } from '../../../core/identity/operatorAccess.ts';
import type { Application } from '../../../core/identity/ports.ts';
import type { Clock } from '../../../core/shared/ports.ts';
import { actorOfRequest } from './operatorAuth.ts';
import { problemResponses, Uuid } from './schemas.ts';

type Gate = (request: FastifyRequest, reply: FastifyReply) => Promise<unknown>;

export function registerRegistryAdminRoutes(
  app: FastifyInstance,
  deps: {
    security: { adminToken: never[] }[];
    tags: string[];
    viewers: Gate;
    admins: Gate;
    registries: { registries: RegistryStore; clock: Clock; schemas: JsonSchemaValidator };
    /** The application, if the operator holds `least` in its tenant. */
    applicationFor(request: FastifyRequest, id: string, least: OperatorRole): Promise<Application>;
  },
): void {
  const { security, tags, viewers, admins, applicationFor } = deps;
  app.post<{ Params: { id: string }; Body: StatusDefinitionRequest }>(
    '/admin/v1/applications/:id/status-definitions',
    {
      onRequest: admins,
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
      const { tenantId } = await applicationFor(request, request.params.id, 'admin');
      const { definition, created } = await defineStatuses(deps.registries, request.params.id, request.body, {
        actor: actorOfRequest(request),
        tenantId,
      });
      return reply
        .code(created ? 201 : 200)
        .send({ ...definition, createdAt: definition.createdAt.toISOString() });
    },
  );

  app.get<{ Params: { id: string } }>(
    '/admin/v1/applications/:id/status-definitions',
    {
      onRequest: viewers,
      schema: {
        tags,
        security,
        summary: 'List status definitions',
        params: Type.Object({ id: Uuid }),
        response: { 200: Type.Array(Type.Record(Type.String(), Type.Unknown())) },
      },
    },
    async (request) => {
      await applicationFor(request, request.params.id, 'viewer');
      return (await deps.registries.registries.listStatusDefinitions(request.params.id)).map((d) => ({
        ...d,
        createdAt: d.createdAt.toISOString(),
      }));
    },
  );

  app.post<{ Params: { id: string }; Body: OperationDefinitionRequest }>(
    '/admin/v1/applications/:id/operation-definitions',
    {
      onRequest: admins,
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
      const { tenantId } = await applicationFor(request, request.params.id, 'admin');
      const { definition, created } = await defineOperation(
        deps.registries,
        request.params.id,
        request.body,
        {
          actor: actorOfRequest(request),
          tenantId,
        },
      );
      return reply
        .code(created ? 201 : 200)
        .send({ ...definition, createdAt: definition.createdAt.toISOString() });
    },
  );

  app.get<{ Params: { id: string } }>(
    '/admin/v1/applications/:id/operation-definitions',
    {
      onRequest: viewers,
      schema: {
        tags,
        security,
        summary: 'List operation definitions',
        params: Type.Object({ id: Uuid }),
        response: { 200: Type.Array(Type.Record(Type.String(), Type.Unknown())) },
      },
    },
    async (request) => {
      await applicationFor(request, request.params.id, 'viewer');
      return (await deps.registries.registries.listOperationDefinitions(request.params.id)).map((d) => ({
        ...d,
        createdAt: d.createdAt.toISOString(),
      }));
    },
  );
}

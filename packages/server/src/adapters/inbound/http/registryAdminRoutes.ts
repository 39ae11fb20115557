/**
 * An application's registries on the admin API: status definitions and operation definitions (the
 * tenant's admins define them, anyone who sees the tenant reads them; each new version audited).
 */
import { OperationDefinitionRequest, StatusDefinitionRequest } from '@tdp/protocol';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { type TSchema, Type } from 'typebox';
import type { JsonSchemaValidator, RegistryAuthor, RegistryStore } from '../../../core/definitions/ports.ts';
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
  const { registries } = deps.registries;
  const dated = <T extends { createdAt: Date }>(d: T) => ({ ...d, createdAt: d.createdAt.toISOString() });
  const Params = Type.Object({ id: Uuid });
  const Definition = Type.Record(Type.String(), Type.Unknown());

  /** One registry: define a version (its tenant's admins; a new version audited), list them (viewers). */
  function registry<Body>(kind: {
    path: string;
    defineSummary: string;
    listSummary: string;
    body: TSchema;
    define(
      applicationId: string,
      body: Body,
      by: RegistryAuthor,
    ): Promise<{ definition: { createdAt: Date }; created: boolean }>;
    list(applicationId: string): Promise<{ createdAt: Date }[]>;
  }): void {
    const path = `/admin/v1/applications/:id/${kind.path}`;
    app.post<{ Params: { id: string }; Body: Body }>(
      path,
      {
        onRequest: admins,
        schema: {
          tags,
          security,
          summary: kind.defineSummary,
          params: Params,
          body: kind.body,
          response: { 200: Definition, 201: Definition, ...problemResponses },
        },
      },
      async (request, reply) => {
        const { tenantId } = await applicationFor(request, request.params.id, 'admin');
        const { definition, created } = await kind.define(request.params.id, request.body as Body, {
          actor: actorOfRequest(request),
          tenantId,
        });
        return reply.code(created ? 201 : 200).send(dated(definition));
      },
    );
    app.get<{ Params: { id: string } }>(
      path,
      {
        onRequest: viewers,
        schema: {
          tags,
          security,
          summary: kind.listSummary,
          params: Params,
          response: { 200: Type.Array(Definition) },
        },
      },
      async (request) => {
        await applicationFor(request, request.params.id, 'viewer');
        return (await kind.list(request.params.id)).map(dated);
      },
    );
  }

  registry<StatusDefinitionRequest>({
    path: 'status-definitions',
    defineSummary: 'Define a version of the business statuses of a task type (immutable once defined)',
    listSummary: 'List status definitions',
    body: StatusDefinitionRequest,
    define: (applicationId, body, by) => defineStatuses(deps.registries, applicationId, body, by),
    list: (applicationId) => registries.listStatusDefinitions(applicationId),
  });
  registry<OperationDefinitionRequest>({
    path: 'operation-definitions',
    defineSummary:
      'Define a version of an operation: producers, event types and the data schemas they may send',
    listSummary: 'List operation definitions',
    body: OperationDefinitionRequest,
    define: (applicationId, body, by) => defineOperation(deps.registries, applicationId, body, by),
    list: (applicationId) => registries.listOperationDefinitions(applicationId),
  });
}

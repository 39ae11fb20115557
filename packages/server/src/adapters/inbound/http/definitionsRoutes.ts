import {
  PublishWorkflowDefinitionRequest,
  PublishWorkflowDefinitionResponse,
  WorkflowDefinition,
  WorkflowName,
  WorkflowVersion,
} from '@tdp/protocol';
import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import type { StoredDefinition } from '../../../core/definitions/ports.ts';
import { type DefinitionDeps, publishDefinition } from '../../../core/definitions/publishDefinition.ts';
import { type CapabilityOffers, publishWarnings } from '../../../core/definitions/publishWarnings.ts';
import type { ApiKeyAuthenticator } from '../../../core/identity/authenticate.ts';
import { AppError } from '../../../core/shared/errors.ts';
import { principalOf, requireApplication } from './auth.ts';
import { problemResponses, Uuid } from './schemas.ts';

const toView = (d: StoredDefinition): WorkflowDefinition => ({
  id: d.id,
  name: d.name,
  version: d.version,
  description: d.description,
  inputSchema: d.inputSchema,
  steps: d.steps,
  publishedAt: d.publishedAt.toISOString(),
});

export function registerDefinitionRoutes(
  app: FastifyInstance,
  deps: { authenticator: ApiKeyAuthenticator; definitions: DefinitionDeps; offers: CapabilityOffers },
): void {
  const onRequest = requireApplication(deps.authenticator);
  const security = [{ apiKey: [] }];

  app.post<{ Body: PublishWorkflowDefinitionRequest }>(
    '/v1/workflow-definitions',
    {
      onRequest,
      schema: {
        tags: ['workflow definitions'],
        summary: 'Publish a workflow definition',
        description:
          'Validates the DAG (unique keys, known dependencies, no cycle, mappings only from the input or upstream ' +
          'steps, a valid input JSON Schema) and publishes it. A name + version is immutable: publishing identical ' +
          'content again answers 200 with the stored definition; different content is 409. `warnings` names each ' +
          'step no registered worker can take now (with the nearest offered names): it would wait for a worker.',
        security,
        body: PublishWorkflowDefinitionRequest,
        response: {
          200: PublishWorkflowDefinitionResponse,
          201: PublishWorkflowDefinitionResponse,
          ...problemResponses,
        },
      },
    },
    async (request, reply) => {
      const { definition, created } = await publishDefinition(
        deps.definitions,
        principalOf(request),
        request.body,
      );
      const warnings = await publishWarnings(deps.offers, definition);
      return reply.code(created ? 201 : 200).send({ ...toView(definition), warnings });
    },
  );

  app.get<{ Querystring: { name?: string; limit?: number; cursor?: string } }>(
    '/v1/workflow-definitions',
    {
      onRequest,
      schema: {
        tags: ['workflow definitions'],
        summary: 'List published workflow definitions of your tenant',
        security,
        querystring: Type.Object(
          {
            name: Type.Optional(WorkflowName),
            limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 200, default: 50 })),
            cursor: Type.Optional(Uuid),
          },
          { additionalProperties: false },
        ),
        response: {
          200: Type.Object({
            items: Type.Array(WorkflowDefinition),
            nextCursor: Type.Union([Type.String(), Type.Null()]),
          }),
          ...problemResponses,
        },
      },
    },
    async (request) => {
      const limit = request.query.limit ?? 50;
      const rows = await deps.definitions.store.list(principalOf(request).tenantId, {
        limit: limit + 1,
        ...(request.query.name ? { name: request.query.name } : {}),
        ...(request.query.cursor ? { after: request.query.cursor } : {}),
      });
      const page = rows.slice(0, limit);
      return { items: page.map(toView), nextCursor: rows.length > limit ? (page.at(-1)?.id ?? null) : null };
    },
  );

  app.get<{ Params: { name: string; version: string } }>(
    '/v1/workflow-definitions/:name/versions/:version',
    {
      onRequest,
      schema: {
        tags: ['workflow definitions'],
        summary: 'Read one published workflow definition',
        security,
        params: Type.Object({ name: WorkflowName, version: WorkflowVersion }),
        response: { 200: WorkflowDefinition, ...problemResponses },
      },
    },
    async (request) => {
      const { name, version } = request.params;
      const found = await deps.definitions.store.get(principalOf(request).tenantId, name, version);
      if (!found)
        throw new AppError(
          'WORKFLOW_DEFINITION_NOT_FOUND',
          `no workflow "${name}" version "${version}" is published`,
        );
      return toView(found);
    },
  );
}

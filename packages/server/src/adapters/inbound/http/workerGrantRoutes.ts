/**
 * An attempt's access to files, asked for by the worker that runs it: a short-lived URL to a resource or
 * a new output artifact from the application's resource provider, and the renewal of one it still needs.
 */
import { AccessGrant, ArtifactGrantRequest, GrantRenewalRequest, ResourceGrantRequest } from '@tdp/protocol';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import { type GrantDeps, type GrantRequest, renewGrant, requestGrant } from '../../../core/grants/grants.ts';
import { IdempotencyKeyHeader, problemResponses, Uuid } from './schemas.ts';

export function registerWorkerGrantRoutes(
  app: FastifyInstance,
  deps: {
    grants: GrantDeps;
    /** The worker's credential id, from its key (charged to the worker's rate limit). */
    workerCredential: (request: FastifyRequest) => Promise<string>;
    tags: string[];
    security: Record<string, string[]>[];
  },
): void {
  const { tags, security, workerCredential } = deps;
  const grantRoute = (
    path: string,
    summary: string,
    body: ReturnType<typeof Type.Object>,
    toRequest: (body: Record<string, unknown>, idempotencyKey: string) => GrantRequest,
  ) =>
    app.post<{ Params: { id: string }; Body: Record<string, unknown> }>(
      path,
      {
        schema: {
          tags,
          security,
          summary,
          params: Type.Object({ id: Uuid }),
          headers: IdempotencyKeyHeader,
          body,
          response: { 200: AccessGrant, ...problemResponses },
        },
      },
      async (request) =>
        requestGrant(
          deps.grants,
          await workerCredential(request),
          request.params.id,
          toRequest(request.body, request.headers['idempotency-key'] as string),
        ),
    );

  grantRoute(
    '/v1/attempts/:id/grants',
    "A short-lived URL to download or overwrite a resource, from the application's resource provider",
    ResourceGrantRequest,
    (body, idempotencyKey) => ({
      leaseVersion: body.leaseVersion as number,
      idempotencyKey,
      purpose: body.access as 'DOWNLOAD' | 'UPLOAD',
      resourceRef: body.resourceRef as string,
      ...(body.scope ? { scope: body.scope as string } : {}),
    }),
  );

  grantRoute(
    '/v1/attempts/:id/artifacts',
    'Allocates an output artifact: the provider names the new resource and gives a PUT URL with a size limit',
    ArtifactGrantRequest,
    (body, idempotencyKey) => ({
      leaseVersion: body.leaseVersion as number,
      idempotencyKey,
      purpose: 'ARTIFACT',
      artifact: {
        relativePath: body.relativePath as string,
        artifactType: body.artifactType as string,
        mediaType: body.mediaType as string,
        maxBytes: body.maxBytes as number,
      },
    }),
  );

  app.post<{ Params: { id: string; grantId: string }; Body: GrantRenewalRequest }>(
    '/v1/attempts/:id/grants/:grantId(^[0-9a-fA-F-]{36})::renew',
    {
      schema: {
        tags,
        security,
        summary: 'Renews a grant the attempt still needs: a new URL and expiry for the same resource',
        params: Type.Object({ id: Uuid, grantId: Uuid }),
        headers: IdempotencyKeyHeader,
        body: GrantRenewalRequest,
        response: { 200: AccessGrant, ...problemResponses },
      },
    },
    async (request) =>
      renewGrant(deps.grants, await workerCredential(request), request.params.id, request.params.grantId, {
        leaseVersion: request.body.leaseVersion,
        renewalKey: request.headers['idempotency-key'] as string,
      }),
  );
}

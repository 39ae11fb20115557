/**
 * A task's classification, its event log and status reads, user tokens, and who may see a task (ACL,
 * external references).
 */
import {
  AclGrantRequest,
  BatchGetRequest,
  BatchGetResult,
  ClassificationRequest,
  TaskEventPage,
  TaskSummary,
  TaskWithExecution,
  UserTokenRequest,
} from '@tdp/protocol';
import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import { AppError } from '../../../core/shared/errors.ts';
import { attachExternalRef, grantAccess, revokeAccess } from '../../../core/status/access.ts';
import { classifyTask } from '../../../core/status/classification.ts';
import { batchGet, myTasks, taskEvents } from '../../../core/status/reads.ts';
import { problemResponses, Uuid } from './schemas.ts';
import {
  type StatusCallers,
  type StatusRouteDeps,
  security,
  tags,
  unauthenticated,
  userSecurity,
} from './statusRouteContext.ts';

export function registerTaskStatusRoutes(
  app: FastifyInstance,
  deps: StatusRouteDeps,
  { caller, application, reader }: StatusCallers,
): void {
  app.patch<{ Params: { id: string }; Body: ClassificationRequest }>(
    '/v1/tasks/:id/classification',
    {
      schema: {
        tags,
        security,
        summary:
          'Bind taskType / status definition (once) or change productId; requires If-Match: "<taskVersion>"',
        params: Type.Object({ id: Uuid }),
        body: ClassificationRequest,
        response: { 200: TaskWithExecution, ...problemResponses },
      },
    },
    async (request, reply) => {
      const principal = await application(request);
      const ifMatch = request.headers['if-match'];
      if (!ifMatch)
        throw new AppError(
          'PRECONDITION_REQUIRED',
          'send If-Match with the task version you last read, e.g. If-Match: "4"',
        );
      const version = /^(?:W\/)?"?(\d+)"?$/.exec(String(ifMatch).trim())?.[1];
      if (!version) throw new AppError('VALIDATION_FAILED', 'If-Match must be a task version, e.g. "4"');
      const view = await classifyTask(
        deps.status,
        principal,
        request.params.id,
        BigInt(version),
        request.body,
      );
      return reply.header('etag', `"${view.task.version}"`).send(view);
    },
  );

  app.get<{ Params: { id: string }; Querystring: { afterTaskVersion?: string; limit?: number } }>(
    '/v1/tasks/:id/events',
    {
      schema: {
        tags,
        security,
        summary: 'The task timeline after a version (410 EVENTS_PRUNED when that part was pruned)',
        params: Type.Object({ id: Uuid }),
        querystring: Type.Object(
          {
            afterTaskVersion: Type.Optional(Type.String({ pattern: '^[0-9]+$' })),
            limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 500, default: 100 })),
          },
          { additionalProperties: false },
        ),
        response: { 200: TaskEventPage, ...problemResponses },
      },
    },
    async (request) =>
      taskEvents(
        deps.reads,
        await reader(request),
        request.params.id,
        BigInt(request.query.afterTaskVersion ?? '0'),
        request.query.limit ?? 100,
      ),
  );

  app.post<{ Body: BatchGetRequest }>(
    '/v1/tasks/status::batchGet',
    {
      schema: {
        tags,
        security,
        summary: 'Status of many tasks; those at your known version come back without a body',
        body: BatchGetRequest,
        response: { 200: BatchGetResult, ...problemResponses },
      },
    },
    async (request) => batchGet(deps.reads, await reader(request), request.body.tasks),
  );

  app.get<{ Querystring: { limit?: number; cursor?: string } }>(
    '/v1/me/tasks',
    {
      schema: {
        tags,
        security: userSecurity,
        summary: "The user's tasks (owner or ACL), most recently updated first; needs a user token",
        querystring: Type.Object(
          {
            limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 200, default: 50 })),
            cursor: Type.Optional(Type.String({ maxLength: 200 })),
          },
          { additionalProperties: false },
        ),
        response: {
          200: Type.Object({
            items: Type.Array(TaskSummary),
            nextCursor: Type.Union([Type.String(), Type.Null()]),
          }),
          ...problemResponses,
        },
      },
    },
    async (request) => {
      const who = await caller(request);
      if (who?.kind !== 'user') throw unauthenticated(request, 'send a user token (POST /v1/user-tokens)');
      return myTasks(deps.reads, who.principal, {
        limit: request.query.limit ?? 50,
        cursor: request.query.cursor,
      });
    },
  );

  app.post<{ Body: UserTokenRequest }>(
    '/v1/user-tokens',
    {
      schema: {
        tags,
        security,
        summary: 'A short-lived token for one of your users (reads as that user)',
        body: UserTokenRequest,
        response: {
          201: Type.Object({ token: Type.String(), expiresAt: Type.String() }),
          ...problemResponses,
        },
      },
    },
    async (request, reply) => {
      const principal = await application(request);
      const expiresAt = new Date(deps.status.clock.now().getTime() + (request.body.ttlSeconds ?? 900) * 1000);
      const token = await deps.userTokens.sign(
        {
          kind: 'user',
          applicationId: principal.applicationId,
          tenantId: principal.tenantId,
          keyId: principal.keyId,
          viewer: {
            userId: request.body.userId,
            projects: request.body.projects ?? [],
            roles: request.body.roles ?? [],
          },
          userView: principal.userView,
        },
        expiresAt,
      );
      return reply.code(201).send({ token, expiresAt: expiresAt.toISOString() });
    },
  );

  app.post<{ Params: { id: string }; Body: AclGrantRequest }>(
    '/v1/tasks/:id/acl',
    {
      schema: {
        tags,
        security,
        summary: 'Let a user, project or role see the task',
        params: Type.Object({ id: Uuid }),
        body: AclGrantRequest,
        response: { 204: Type.Null(), ...problemResponses },
      },
    },
    async (request, reply) => {
      await grantAccess(deps.reads, await application(request), request.params.id, request.body);
      return reply.code(204).send();
    },
  );

  app.delete<{ Params: { id: string; principalType: 'USER' | 'PROJECT' | 'ROLE'; principalId: string } }>(
    '/v1/tasks/:id/acl/:principalType/:principalId',
    {
      schema: {
        tags,
        security,
        summary: 'Revoke access; clients of that principal receive a removal',
        params: Type.Object({
          id: Uuid,
          principalType: Type.Union([Type.Literal('USER'), Type.Literal('PROJECT'), Type.Literal('ROLE')]),
          principalId: Type.String({ minLength: 1, maxLength: 200 }),
        }),
        response: { 204: Type.Null(), ...problemResponses },
      },
    },
    async (request, reply) => {
      await revokeAccess(
        deps.reads,
        await application(request),
        request.params.id,
        request.params.principalType,
        request.params.principalId,
      );
      return reply.code(204).send();
    },
  );

  app.put<{ Params: { id: string; refType: string; refValue: string } }>(
    '/v1/tasks/:id/external-refs/:refType/:refValue',
    {
      schema: {
        tags,
        security,
        summary: 'Map an external reference (unique per application) to the task',
        params: Type.Object({
          id: Uuid,
          refType: Type.String({ minLength: 1, maxLength: 64 }),
          refValue: Type.String({ minLength: 1, maxLength: 255 }),
        }),
        response: { 204: Type.Null(), ...problemResponses },
      },
    },
    async (request, reply) => {
      await attachExternalRef(
        deps.reads,
        await application(request),
        request.params.id,
        request.params.refType,
        request.params.refValue,
      );
      return reply.code(204).send();
    },
  );

  app.get<{ Params: { refType: string; refValue: string } }>(
    '/v1/external-refs/:refType/:refValue',
    {
      schema: {
        tags,
        security,
        summary: 'The task an external reference maps to',
        params: Type.Object({
          refType: Type.String({ minLength: 1, maxLength: 64 }),
          refValue: Type.String({ minLength: 1, maxLength: 255 }),
        }),
        response: { 200: Type.Object({ taskId: Type.String() }), ...problemResponses },
      },
    },
    async (request) => {
      const principal = await application(request);
      const taskId = await deps.reads.reads.findExternalRef(
        principal.applicationId,
        request.params.refType,
        request.params.refValue,
      );
      if (!taskId)
        throw new AppError(
          'TASK_NOT_FOUND',
          `no task is mapped to ${request.params.refType}:${request.params.refValue}`,
        );
      return { taskId };
    },
  );
}

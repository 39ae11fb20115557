import {
  AclGrantRequest,
  BatchGetRequest,
  BatchGetResult,
  BatchItemResult,
  ClassificationRequest,
  CompactTaskEvent,
  CreateWorkflowRequest,
  EventResult,
  ExecutionContext,
  FullTaskEvent,
  HeartbeatItem,
  HeartbeatResult,
  NewStatusTask,
  RegisterExecutionRequest,
  TaskEventPage,
  TaskEventRequest,
  TaskSummary,
  TaskWithExecution,
  UserTokenRequest,
  WorkflowCreated,
} from '@tdp/protocol';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import type { ApiKeyAuthenticator } from '../../../core/identity/authenticate.ts';
import type { ApplicationPrincipal } from '../../../core/identity/ports.ts';
import { AppError } from '../../../core/shared/errors.ts';
import { attachExternalRef, grantAccess, revokeAccess } from '../../../core/status/access.ts';
import { classifyTask } from '../../../core/status/classification.ts';
import type { StatusDeps } from '../../../core/status/deps.ts';
import {
  type EventCredential,
  type ReportedEvent,
  reportTaskEvent,
  reportTaskEvents,
} from '../../../core/status/events.ts';
import { activateStep, registerExecution } from '../../../core/status/executions.ts';
import { recordHeartbeats } from '../../../core/status/heartbeats.ts';
import type { UserPrincipal, UserTokens } from '../../../core/status/ports.ts';
import {
  batchGet,
  myTasks,
  type ReadDeps,
  type Reader,
  taskEvents,
  workflowView,
} from '../../../core/status/reads.ts';
import { addWorkflowTask, createWorkflow } from '../../../core/status/workflows.ts';
import { problem } from './problems.ts';
import { emptyBodyAsObject, problemResponses, Uuid } from './schemas.ts';

export interface StatusRouteDeps {
  authenticator: ApiKeyAuthenticator;
  status: StatusDeps;
  reads: ReadDeps;
  userTokens: UserTokens;
}

type Caller =
  | { kind: 'application'; principal: ApplicationPrincipal }
  | { kind: 'user'; principal: UserPrincipal }
  | { kind: 'token'; token: string };

function bearer(request: FastifyRequest): string | null {
  const match = /^Bearer\s+(\S+)$/i.exec(request.headers.authorization ?? '');
  return match?.[1] ?? null;
}

const unauthenticated = (request: FastifyRequest, detail: string) =>
  new AppError('UNAUTHENTICATED', `${detail} (${request.method} ${request.url.split('?')[0]})`);

export function registerStatusRoutes(app: FastifyInstance, deps: StatusRouteDeps): void {
  /** API keys start with `tdp_`; anything else is a token (a user token first, then an execution token). */
  async function caller(request: FastifyRequest): Promise<Caller | null> {
    const token = bearer(request);
    if (!token) return null;
    if (token.startsWith('tdp_')) {
      const principal = await deps.authenticator.authenticate(token);
      if (!principal) throw unauthenticated(request, 'the API key is not valid');
      return { kind: 'application', principal };
    }
    const user = await deps.userTokens.verify(token, deps.status.clock.now());
    return user ? { kind: 'user', principal: user } : { kind: 'token', token };
  }

  async function application(request: FastifyRequest): Promise<ApplicationPrincipal> {
    const who = await caller(request);
    if (who?.kind !== 'application')
      throw unauthenticated(request, 'send your API key as "Authorization: Bearer <key>"');
    return who.principal;
  }

  async function reader(request: FastifyRequest): Promise<Reader> {
    const who = await caller(request);
    if (who?.kind === 'application' || who?.kind === 'user') return who.principal;
    throw unauthenticated(request, 'send an API key or a user token');
  }

  const security = [{ apiKey: [] }];
  const tags = ['status'];

  app.post<{ Body: CreateWorkflowRequest }>(
    '/v1/workflows',
    {
      schema: {
        tags,
        security,
        summary: 'Create a workflow with its first tasks and known steps (idempotent by clientWorkflowKey)',
        body: CreateWorkflowRequest,
        response: { 200: WorkflowCreated, 201: WorkflowCreated, ...problemResponses },
      },
    },
    async (request, reply) => {
      const result = await createWorkflow(deps.status, await application(request), request.body);
      return reply.code(result.created ? 201 : 200).send(result);
    },
  );

  app.get<{ Params: { id: string } }>(
    '/v1/workflows/:id',
    {
      schema: {
        tags,
        security,
        summary: 'A workflow with the task summaries its reader may see',
        params: Type.Object({ id: Uuid }),
        response: {
          200: Type.Object({
            workflow: Type.Record(Type.String(), Type.Unknown()),
            tasks: Type.Array(TaskSummary),
          }),
          ...problemResponses,
        },
      },
    },
    async (request) => workflowView(deps.reads, await reader(request), request.params.id),
  );

  app.post<{ Params: { id: string }; Body: NewStatusTask }>(
    '/v1/workflows/:id/tasks',
    {
      schema: {
        tags,
        security,
        summary: 'Add a task to a workflow (idempotent by clientTaskKey)',
        params: Type.Object({ id: Uuid }),
        body: NewStatusTask,
        response: {
          200: Type.Object({
            taskId: Type.String(),
            taskVersion: Type.String(),
            workflowVersion: Type.String(),
            created: Type.Boolean(),
          }),
          201: Type.Object({
            taskId: Type.String(),
            taskVersion: Type.String(),
            workflowVersion: Type.String(),
            created: Type.Boolean(),
          }),
          ...problemResponses,
        },
      },
    },
    async (request, reply) => {
      const result = await addWorkflowTask(
        deps.status,
        await application(request),
        request.params.id,
        request.body,
      );
      return reply.code(result.created ? 201 : 200).send(result);
    },
  );

  app.post<{ Params: { taskId: string; stepId: string }; Body: { attempt?: number } }>(
    '/v1/tasks/:taskId/steps/:stepId(^[A-Za-z0-9][A-Za-z0-9._:-]*?)::activate',
    {
      preValidation: emptyBodyAsObject,
      schema: {
        tags,
        security,
        summary: 'Activate a known step: returns its execution context (coordinator)',
        params: Type.Object({ taskId: Uuid, stepId: Type.String() }),
        body: Type.Object(
          { attempt: Type.Optional(Type.Integer({ minimum: 1 })) },
          { additionalProperties: false },
        ),
        response: { 200: ExecutionContext, 201: ExecutionContext, ...problemResponses },
      },
    },
    async (request, reply) => {
      const context = await activateStep(
        deps.status,
        await application(request),
        request.params.taskId,
        request.params.stepId,
        request.body.attempt,
      );
      return reply.code(context.created ? 201 : 200).send(context);
    },
  );

  app.post<{ Params: { id: string }; Body: RegisterExecutionRequest }>(
    '/v1/tasks/:id/executions::register',
    {
      schema: {
        tags,
        security,
        summary: 'Register a dynamic step (coordinator key, or the parent execution token)',
        params: Type.Object({ id: Uuid }),
        body: RegisterExecutionRequest,
        response: { 200: ExecutionContext, 201: ExecutionContext, ...problemResponses },
      },
    },
    async (request, reply) => {
      const who = await caller(request);
      let context: ExecutionContext;
      if (who?.kind === 'application') {
        context = await registerExecution(
          deps.status,
          { kind: 'coordinator', principal: who.principal },
          request.params.id,
          request.body,
        );
      } else if (who?.kind === 'token') {
        const claims = await deps.status.credentials.verify(who.token, deps.status.clock.now());
        if (!claims)
          throw new AppError('EXECUTION_CREDENTIAL_INVALID', 'the execution token is invalid or expired');
        context = await registerExecution(
          deps.status,
          { kind: 'parent', claims },
          request.params.id,
          request.body,
        );
      } else {
        throw unauthenticated(request, 'send the coordinator API key or the parent execution token');
      }
      return reply.code(context.created ? 201 : 200).send(context);
    },
  );

  function credentialFor(
    who: Caller | null,
    body: ReportedEvent & { executionHandle?: string; executionToken?: string },
  ): EventCredential {
    if (body.executionToken) return { kind: 'token', token: body.executionToken };
    if (body.executionHandle) {
      if (who?.kind !== 'application')
        throw new AppError(
          'UNAUTHENTICATED',
          'an executionHandle is used with your API key in Authorization',
        );
      return { kind: 'handle', handle: body.executionHandle, principal: who.principal };
    }
    if (who?.kind === 'token') return { kind: 'token', token: who.token };
    if (who?.kind === 'application') return { kind: 'coordinator', principal: who.principal };
    throw new AppError(
      'EXECUTION_CREDENTIAL_INVALID',
      'send an execution token, or an executionHandle with your API key',
    );
  }

  const decode = (body: Record<string, unknown>): ReportedEvent => {
    const { executionHandle: _h, executionToken: _t, ...event } = body;
    return event as unknown as ReportedEvent;
  };

  app.post<{ Body: TaskEventRequest }>(
    '/v1/task-events',
    {
      schema: {
        tags,
        summary:
          'Report one event (execution token; or executionHandle / coordinator events with the API key)',
        description:
          'Full self-describing form with `Authorization: Bearer <executionToken>`, compact form with `executionHandle` and ' +
          'the API key, or TASK_COMPLETED / TASK_FAILED with the API key. A retry with the same eventId and content ' +
          'returns the first answer (`duplicate: true`); refusals are problem+json with the codes of docs/errors.md.',
        body: TaskEventRequest,
        response: { 200: EventResult, ...problemResponses },
      },
    },
    async (request) => {
      const who = await caller(request);
      const body = request.body as unknown as Record<string, unknown>;
      return reportTaskEvent(deps.status, {
        credential: credentialFor(who, body as never),
        event: decode(body),
      });
    },
  );

  app.post<{ Body: { events: Record<string, unknown>[] } }>(
    '/v1/task-events::batch',
    {
      schema: {
        tags,
        summary: 'Report up to 500 events; each item gets its own result',
        body: Type.Object(
          {
            events: Type.Array(
              Type.Union([
                CompactTaskEvent,
                Type.Object(
                  {
                    ...FullTaskEvent.properties,
                    executionToken: Type.Optional(Type.String({ minLength: 10, maxLength: 4096 })),
                  },
                  { additionalProperties: false },
                ),
              ]),
              { minItems: 1, maxItems: 500 },
            ),
          },
          { additionalProperties: false },
        ),
        response: { 200: Type.Object({ results: Type.Array(BatchItemResult) }), ...problemResponses },
      },
    },
    async (request) => {
      const who = await caller(request);
      const prepared: {
        index: number;
        item?: { credential: EventCredential; event: ReportedEvent };
        error?: AppError;
      }[] = request.body.events.map((body, index) => {
        try {
          return { index, item: { credential: credentialFor(who, body as never), event: decode(body) } };
        } catch (error) {
          if (error instanceof AppError) return { index, error };
          throw error;
        }
      });
      const valid = prepared.filter((p) => p.item);
      const outcomes =
        valid.length > 0
          ? await reportTaskEvents(
              deps.status,
              valid.map((p) => p.item!),
            )
          : [];
      const results = prepared.map(
        (p) =>
          ({
            index: p.index,
            eventId: (request.body.events[p.index]!.eventId as string) ?? null,
            ok: false,
            error: p.error ? problemOf(p.error) : undefined,
          }) as Record<string, unknown>,
      );
      valid.forEach((p, i) => {
        const outcome = outcomes[i]!;
        results[p.index] = outcome.ok
          ? { index: p.index, eventId: outcome.result.eventId, ok: true, result: outcome.result }
          : {
              index: p.index,
              eventId: request.body.events[p.index]!.eventId ?? null,
              ok: false,
              error: problemOf(outcome.error),
            };
      });
      return { results };
    },
  );

  app.post<{ Body: { heartbeats: HeartbeatItem[] } }>(
    '/v1/task-heartbeats::batch',
    {
      schema: {
        tags,
        summary: 'Heartbeats of running executions (light path: no version, no message)',
        body: Type.Object(
          { heartbeats: Type.Array(HeartbeatItem, { minItems: 1, maxItems: 2000 }) },
          { additionalProperties: false },
        ),
        response: {
          200: Type.Object({ results: Type.Array(HeartbeatResult), receivedAt: Type.String() }),
          ...problemResponses,
        },
      },
    },
    async (request) => {
      const who = await caller(request);
      const principal = who?.kind === 'application' ? who.principal : null;
      const results = await recordHeartbeats(deps.status, principal, request.body.heartbeats);
      return { results, receivedAt: deps.status.clock.now().toISOString() };
    },
  );

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
          viewer: {
            userId: request.body.userId,
            projects: request.body.projects ?? [],
            roles: request.body.roles ?? [],
          },
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

function problemOf(error: AppError) {
  const p = problem(error.code, error.message);
  return { code: p.code, status: p.status, detail: p.detail };
}

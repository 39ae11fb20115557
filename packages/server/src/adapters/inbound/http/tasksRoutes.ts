import { CreateTaskRequest, LifecycleStatus, TaskCreated, TaskPage, TaskWithExecution } from '@tdp/protocol';
import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import type { ApiKeyAuthenticator } from '../../../core/identity/authenticate.ts';
import type { ArchivedTasks } from '../../../core/retention/ports.ts';
import { type CancelDeps, cancelTask } from '../../../core/tasks/cancelTask.ts';
import { type CreateTaskDeps, createTask } from '../../../core/tasks/createTask.ts';
import type { TaskStore } from '../../../core/tasks/ports.ts';
import { getTask, listTasks } from '../../../core/tasks/queryTasks.ts';
import { retryTask } from '../../../core/tasks/retryTask.ts';
import { principalOf, requireApplication } from './auth.ts';
import { readDeprecatedStatusSpellings } from './deprecatedSpellings.ts';
import { requireIdempotencyKey } from './problems.ts';
import { emptyBodyAsObject, IdempotencyKeyHeader, problemResponses, Uuid } from './schemas.ts';
import { inboundSpan, traceIdOf } from './tracing.ts';

export interface TaskRouteDeps {
  authenticator: ApiKeyAuthenticator;
  tasks: TaskStore;
  /** Why each still-queued step of a task has no worker yet (step row id → reasons). */
  unschedulableReasons: (taskId: string) => Promise<Map<string, string[]>>;
  create: CreateTaskDeps;
  cancel: CancelDeps;
  /** Tombstones of archived tasks (410 TASK_ARCHIVED instead of 404). */
  archived?: ArchivedTasks;
}

/**
 * A running map whose next items wait (for a worker, a concurrency key's slot, a rate limit's token)
 * shows why, as a step waiting to be placed does.
 */
export const itemsWait = (
  step: { id: string; status: string; waitingFor?: { kind: string } | null | undefined },
  reasons: ReadonlyMap<string, string[]>,
) => step.status === 'RUNNING' && step.waitingFor?.kind === 'map' && (reasons.get(step.id)?.length ?? 0) > 0;

export function registerTaskRoutes(app: FastifyInstance, deps: TaskRouteDeps): void {
  const onRequest = requireApplication(deps.authenticator);
  const security = [{ apiKey: [] }];

  app.post<{ Body: CreateTaskRequest; Headers: { 'idempotency-key'?: string } }>(
    '/v1/tasks',
    {
      onRequest,
      preValidation: requireIdempotencyKey,
      schema: {
        tags: ['tasks'],
        summary: 'Submit a task',
        description:
          'Creates a task and its first execution from a published workflow. Requires `Idempotency-Key`: a retry ' +
          'with the same key and request returns the original answer (200, `idempotent-replayed: true`) with ' +
          '`current`, the task as it stands now (null once archived); a default spelled out (`priority: 50`, ' +
          '`input: {}`, `stepConstraints: {}`) is the same request. The same key with another request is 409 ' +
          'IDEMPOTENCY_KEY_REUSED, naming the task that holds the key.',
        security,
        headers: IdempotencyKeyHeader,
        body: CreateTaskRequest,
        response: { 200: TaskCreated, 201: TaskCreated, ...problemResponses },
      },
    },
    async (request, reply) => {
      const key = request.headers['idempotency-key']!;
      const result = await inboundSpan(deps.create.tracing, 'POST /v1/tasks', request, async () => {
        const created = await createTask(deps.create, principalOf(request), key, request.body);
        const { task, execution } = created.body;
        // The correlation fields (docs/observability.md), for every line about the task.
        request.log.info(
          {
            traceId: traceIdOf(deps.create.tracing),
            taskId: task.id,
            executionId: execution.id,
            taskVersion: task.version,
            replayed: created.replayed,
          },
          'task created',
        );
        return created;
      });
      if (result.replayed) reply.header('idempotent-replayed', 'true');
      return (
        reply
          // A debounce that kept the waiting task created nothing: 200 with that task.
          .code(result.replayed || result.body.debounce?.outcome === 'dropped' ? 200 : 201)
          .header('location', `/v1/tasks/${result.body.task.id}`)
          .send(result.current === undefined ? result.body : { ...result.body, current: result.current })
      );
    },
  );

  app.get<{
    Querystring: {
      limit?: number;
      cursor?: string;
      externalRef?: string;
      status?: LifecycleStatus;
      parentTaskId?: string;
    };
  }>(
    '/v1/tasks',
    {
      onRequest,
      preValidation: readDeprecatedStatusSpellings,
      schema: {
        tags: ['tasks'],
        summary: 'List tasks, newest first',
        description:
          'Pages with `cursor` (the `nextCursor` of the previous page). `externalRef` finds tasks by your reference; ' +
          '`parentTaskId` lists the child tasks a task started (steps of kind `task`).',
        security,
        querystring: Type.Object(
          {
            limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 200, default: 50 })),
            cursor: Type.Optional(Uuid),
            externalRef: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })),
            status: Type.Optional(LifecycleStatus),
            parentTaskId: Type.Optional(Uuid),
          },
          { additionalProperties: false },
        ),
        response: { 200: TaskPage, ...problemResponses },
      },
    },
    async (request) => {
      const { limit = 50, cursor, externalRef, status, parentTaskId } = request.query;
      return listTasks(deps.tasks, principalOf(request), {
        limit,
        ...(cursor ? { cursor } : {}),
        ...(externalRef ? { externalRef } : {}),
        ...(status ? { lifecycleStatus: status } : {}),
        ...(parentTaskId ? { parentTaskId } : {}),
      });
    },
  );

  const TaskParams = Type.Object({ id: Uuid });

  app.get<{ Params: { id: string } }>(
    '/v1/tasks/:id',
    {
      onRequest,
      schema: {
        tags: ['tasks'],
        summary: 'Read a task with its current execution and steps',
        security,
        params: TaskParams,
        response: { 200: TaskWithExecution, ...problemResponses },
      },
    },
    async (request) => {
      const view = await getTask(deps.tasks, principalOf(request), request.params.id, deps.archived);
      const reasons = await deps.unschedulableReasons(view.task.id);
      for (const step of view.execution.steps) {
        if (step.status === 'READY' || itemsWait(step, reasons))
          step.unschedulableReasons = reasons.get(step.id) ?? [];
      }
      return view;
    },
  );

  app.post<{ Params: { id: string }; Body: { reason?: string } | undefined }>(
    '/v1/tasks/:id(^[0-9a-fA-F-]{36})::cancel',
    {
      onRequest,
      preValidation: emptyBodyAsObject,
      schema: {
        tags: ['tasks'],
        summary: 'Cancel a task',
        description:
          'Idempotent. A task that has not started ends CANCELLED at once; a running one goes to CANCELLING until its ' +
          'attempts stop. A finished task answers 409 INVALID_TRANSITION.',
        security,
        params: TaskParams,
        body: Type.Object(
          { reason: Type.Optional(Type.String({ maxLength: 500 })) },
          { additionalProperties: false },
        ),
        response: { 200: TaskWithExecution, ...problemResponses },
      },
    },
    async (request) =>
      cancelTask(deps.cancel, principalOf(request), request.params.id, request.body?.reason ?? null),
  );

  app.post<{ Params: { id: string }; Body: { fromStep?: string } | undefined }>(
    '/v1/tasks/:id(^[0-9a-fA-F-]{36})::retry',
    {
      onRequest,
      preValidation: emptyBodyAsObject,
      schema: {
        tags: ['tasks'],
        summary: 'Run a finished task again (execution #n+1), optionally from one step',
        description:
          'The new execution uses the same frozen definition; late facts of the earlier one are answered STALE_EXECUTION. ' +
          'With `fromStep`, only that step and the steps downstream of it run again; every other step starts SUCCEEDED ' +
          'with its earlier output (`reusedFromExecutionId` on the step, `STEP_REUSED` in the timeline). An unknown ' +
          'step is 422 RERUN_STEP_UNKNOWN; a step to reuse that did not succeed is 409 RERUN_OUTPUT_MISSING; a task ' +
          'that has not ended is 409 INVALID_TRANSITION (so repeating the request cannot start a second execution).',
        security,
        params: TaskParams,
        body: Type.Object(
          { fromStep: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })) },
          { additionalProperties: false },
        ),
        response: { 201: TaskWithExecution, ...problemResponses },
      },
    },
    async (request, reply) =>
      reply.code(201).send(
        await retryTask(deps.cancel, principalOf(request), request.params.id, {
          fromStep: request.body?.fromStep,
        }),
      ),
  );
}

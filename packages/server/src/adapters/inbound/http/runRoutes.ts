import type { FastifyInstance, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import { callbackDeliveryStatus } from '../../../core/callbacks/deliveryStatus.ts';
import type { ApiKeyAuthenticator } from '../../../core/identity/authenticate.ts';
import type { CallbackDeliveries, TaskRunReads } from '../../../core/operations/ports.ts';
import type { ArchivedTasks } from '../../../core/retention/ports.ts';
import { AppError, archivedTaskError } from '../../../core/shared/errors.ts';
import type { Clock } from '../../../core/shared/ports.ts';
import { problemResponses, Uuid } from './schemas.ts';

/** The timeline and callback log of a task, and redelivery of a callback. */
export function registerRunRoutes(
  app: FastifyInstance,
  deps: {
    authenticator: ApiKeyAuthenticator;
    runs: TaskRunReads;
    callbacks: CallbackDeliveries;
    clock: Clock;
    /** Tombstones of archived tasks (410 TASK_ARCHIVED instead of 404). */
    archived?: ArchivedTasks;
  },
): void {
  async function application(request: FastifyRequest) {
    const token = /^Bearer\s+(\S+)$/i.exec(request.headers.authorization ?? '')?.[1];
    const principal = token ? await deps.authenticator.authenticate(token) : null;
    if (!principal)
      throw new AppError('UNAUTHENTICATED', 'send your API key as "Authorization: Bearer <key>"');
    return principal;
  }
  async function ownTask(request: FastifyRequest, taskId: string) {
    const principal = await application(request);
    if (!(await deps.runs.isApplicationTask(principal.applicationId, taskId))) {
      const tombstone = await deps.archived?.find(taskId);
      if (tombstone?.applicationId === principal.applicationId) throw archivedTaskError(tombstone);
      throw new AppError('TASK_NOT_FOUND', `task ${taskId} does not exist`);
    }
    return principal;
  }
  const tags = ['tasks'];
  const security = [{ apiKey: [] }];
  const itemList = Type.Object({ items: Type.Array(Type.Record(Type.String(), Type.Unknown())) });

  app.get<{ Params: { id: string } }>(
    '/v1/tasks/:id/timeline',
    {
      schema: {
        tags,
        security,
        summary: 'Milestones of the task: created, ready, worker selected, retries, finished',
        params: Type.Object({ id: Uuid }),
        response: { 200: itemList },
      },
    },
    async (request) => {
      await ownTask(request, request.params.id);
      return { items: await timelineOf(deps.runs, request.params.id) };
    },
  );

  app.get<{ Params: { id: string } }>(
    '/v1/tasks/:id/callbacks',
    {
      schema: {
        tags,
        security,
        summary: 'The callback deliveries of the task, with their outcome',
        params: Type.Object({ id: Uuid }),
        response: { 200: itemList },
      },
    },
    async (request) => {
      await ownTask(request, request.params.id);
      return { items: await callbackLogOf(deps.callbacks, request.params.id) };
    },
  );

  app.post<{ Params: { id: string } }>(
    '/v1/callbacks/:id(^[0-9a-fA-F-]{36})::redeliver',
    {
      schema: {
        tags,
        security,
        summary: 'Send a callback again (e.g. after it went DEAD)',
        params: Type.Object({ id: Uuid }),
        response: { 202: Type.Null(), ...problemResponses },
      },
    },
    async (request, reply) => {
      const principal = await application(request);
      if (!(await deps.callbacks.redeliver(principal.applicationId, request.params.id, deps.clock.now()))) {
        throw new AppError('TASK_NOT_FOUND', `callback ${request.params.id} does not exist or is being sent`);
      }
      return reply.code(202).send();
    },
  );
}

/** A task's milestones in order (the API's timeline and the dashboard's). */
export async function timelineOf(runs: TaskRunReads, taskId: string) {
  return (await runs.timeline(taskId)).map((r) => ({
    kind: r.kind,
    message: r.message,
    data: r.data,
    executionId: r.executionId,
    at: r.at.toISOString(),
  }));
}

/** A task's callback deliveries with their outcome (the API's delivery log and the dashboard's). */
export async function callbackLogOf(callbacks: CallbackDeliveries, taskId: string) {
  return (await callbacks.forTask(taskId)).map((r) => ({
    id: r.id,
    sequence: r.sequence,
    eventType: r.event_type,
    status: callbackDeliveryStatus(r.status),
    attempts: r.attempts,
    responseStatus: r.response_status,
    lastError: r.last_error,
    createdAt: r.created_at.toISOString(),
    deliveredAt: r.published_at?.toISOString() ?? null,
  }));
}

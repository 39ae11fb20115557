/**
 * The dashboard's operator actions (a platform-wide operator's session): drain, cordon and uncordon a
 * worker session, and requeue the DEAD rows of one pipeline table. They call the same use cases as the
 * admin API, with a reason, and are audited the same way.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { DeadLetterTable } from '../../../core/operations/ports.ts';
import { type RequeueDeps, requeueDeadLetters } from '../../../core/operations/requeueDeadLetters.ts';
import { AppError } from '../../../core/shared/errors.ts';
import { type DrainWorkerDeps, drainWorkerSession } from '../../../core/workers/drainWorker.ts';
import { type OperatorActionDeps, setWorkerCordon } from '../../../core/workers/operatorActions.ts';
import { actorOfRequest } from './operatorAuth.ts';

/** The use cases behind the dashboard's operator actions, as the admin API has them. */
export interface DashboardOperatorActions {
  workerDrain: DrainWorkerDeps;
  operatorActions: OperatorActionDeps;
  requeue: RequeueDeps;
}

const tables: DeadLetterTable[] = ['outbox', 'realtime', 'callbacks'];

function reasonOf(body: unknown): string {
  const given = (body as { reason?: unknown } | null)?.reason;
  const reason = typeof given === 'string' ? given.trim() : '';
  if (!reason || reason.length > 2000)
    throw new AppError('VALIDATION_FAILED', 'send a reason (up to 2000 characters)');
  return reason;
}

function workerIdOf(id: string): string {
  if (!/^[0-9a-f-]{36}$/i.test(id)) throw new AppError('WORKER_NOT_FOUND', `no live worker session ${id}`);
  return id;
}

export function registerDashboardOperatorRoutes(
  app: FastifyInstance,
  deps: {
    /** The dashboard's gate for a platform-wide operator. */
    onRequest: (request: FastifyRequest, reply: FastifyReply) => Promise<unknown>;
    actions: DashboardOperatorActions;
  },
): void {
  const options = { schema: { hide: true }, onRequest: deps.onRequest };
  app.post<{ Params: { id: string } }>('/dashboard/api/workers/:id/drain', options, async (request, reply) =>
    reply.code(202).send(
      await drainWorkerSession(deps.actions.workerDrain, {
        actor: actorOfRequest(request),
        workerId: workerIdOf(request.params.id),
        reason: reasonOf(request.body),
      }),
    ),
  );
  for (const cordoned of [true, false])
    app.post<{ Params: { id: string } }>(
      `/dashboard/api/workers/:id/${cordoned ? 'cordon' : 'uncordon'}`,
      options,
      async (request) =>
        setWorkerCordon(deps.actions.operatorActions, {
          actor: actorOfRequest(request),
          workerId: workerIdOf(request.params.id),
          cordoned,
          reason: reasonOf(request.body),
        }),
    );
  app.post<{ Params: { table: string } }>(
    '/dashboard/api/dead-letters/:table/requeue',
    options,
    async (request) => {
      const table = request.params.table as DeadLetterTable;
      if (!tables.includes(table))
        throw new AppError('VALIDATION_FAILED', `table must be one of ${tables.join(', ')}`);
      return requeueDeadLetters(deps.actions.requeue, {
        table,
        selection: {},
        reason: reasonOf(request.body),
        actor: actorOfRequest(request),
      });
    },
  );
}

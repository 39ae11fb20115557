/** The operator's requeue of dead letters (admin token, with a reason; audited). */
import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import type { DeadLetterSelection, DeadLetterTable } from '../../../core/operations/ports.ts';
import { type RequeueDeps, requeueDeadLetters } from '../../../core/operations/requeueDeadLetters.ts';
import { AppError } from '../../../core/shared/errors.ts';
import { actorOfRequest, type OperatorGate } from './operatorAuth.ts';
import { problemResponses, Uuid } from './schemas.ts';

const Table = Type.Union([Type.Literal('outbox'), Type.Literal('realtime'), Type.Literal('callbacks')]);
const Timestamp = Type.String({ format: 'date-time' });

export const DeadLetterFilter = Type.Object(
  {
    createdFrom: Type.Optional({ ...Timestamp, description: 'Created at or after' }),
    createdTo: Type.Optional({ ...Timestamp, description: 'Created before' }),
    errorContains: Type.Optional(
      Type.String({ minLength: 1, maxLength: 500, description: 'The last error contains it (any case)' }),
    ),
    applicationId: Type.Optional({
      ...Uuid,
      description: "The row's application (a realtime row: its task's)",
    }),
  },
  { additionalProperties: false },
);

const RequeueRequest = Type.Object(
  {
    table: Table,
    ids: Type.Optional(Type.Array(Uuid, { minItems: 1, maxItems: 1000, uniqueItems: true })),
    filter: Type.Optional(DeadLetterFilter),
    reason: Type.String({ minLength: 1, maxLength: 2000 }),
  },
  { additionalProperties: false },
);

export interface RequeueBody {
  table: DeadLetterTable;
  ids?: string[];
  filter?: {
    createdFrom?: string;
    createdTo?: string;
    errorContains?: string;
    applicationId?: string;
  };
}

/** The rows a requeue asks for, as the use case takes them (ids and a filter together are refused). */
export function deadLetterSelection(body: RequeueBody): DeadLetterSelection {
  if (body.ids && body.filter) throw new AppError('VALIDATION_FAILED', 'send ids or a filter, not both');
  if (body.ids) return { ids: body.ids };
  const f = body.filter ?? {};
  // A time the format allows but no Date holds (a leap second) is refused, not sent to the database.
  const time = (given: string, field: string) => {
    const at = new Date(given);
    if (Number.isNaN(at.getTime())) throw new AppError('VALIDATION_FAILED', `filter.${field} is not a time`);
    return at;
  };
  return {
    filter: {
      ...(f.createdFrom ? { createdFrom: time(f.createdFrom, 'createdFrom') } : {}),
      ...(f.createdTo ? { createdTo: time(f.createdTo, 'createdTo') } : {}),
      ...(f.errorContains ? { errorContains: f.errorContains } : {}),
      ...(f.applicationId ? { applicationId: f.applicationId } : {}),
    },
  };
}

export function registerDeadLetterRoutes(
  app: FastifyInstance,
  deps: { gate: OperatorGate; requeue: RequeueDeps },
): void {
  app.post<{ Body: RequeueBody & { reason: string } }>(
    '/admin/v1/dead-letters::requeue',
    {
      // Dead letters are the platform's: only a platform-wide operator sends them again.
      onRequest: deps.gate('operator', 'platform'),
      schema: {
        tags: ['admin'],
        security: [{ adminToken: [] }],
        summary: 'Send DEAD rows of the outbox, the realtime relay or the callbacks again (audited)',
        description:
          'The DEAD rows named by `ids`, or the oldest DEAD rows matching every field of `filter` (all DEAD rows when neither is sent), up to the `deadLetterRequeueLimit` setting, are put back to be sent now, as `POST /v1/callbacks/{id}:redeliver` does for one callback; rows that are not DEAD are left alone. `ids` and `filter` together are refused. The reason, what was asked and the ids requeued are kept in the operator audit.',
        body: RequeueRequest,
        response: {
          200: Type.Object({
            table: Table,
            requeued: Type.Array(Type.String()),
            auditId: Type.String(),
          }),
          ...problemResponses,
        },
      },
    },
    async (request) =>
      requeueDeadLetters(deps.requeue, {
        table: request.body.table,
        selection: deadLetterSelection(request.body),
        reason: request.body.reason,
        actor: actorOfRequest(request),
      }),
  );
}

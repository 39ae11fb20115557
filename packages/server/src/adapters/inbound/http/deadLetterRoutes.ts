/** The operator's requeue of dead letters (admin token, with a reason; audited). */
import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import { type RequeueDeps, requeueDeadLetters } from '../../../core/operations/requeueDeadLetters.ts';
import { requireAdmin } from './auth.ts';
import { problemResponses, Uuid } from './schemas.ts';

const RequeueRequest = Type.Object(
  {
    table: Type.Literal('callbacks'),
    ids: Type.Optional(Type.Array(Uuid, { minItems: 1, maxItems: 1000, uniqueItems: true })),
    reason: Type.String({ minLength: 1, maxLength: 2000 }),
  },
  { additionalProperties: false },
);

export function registerDeadLetterRoutes(
  app: FastifyInstance,
  deps: { adminToken: string; requeue: RequeueDeps },
): void {
  app.post<{ Body: { table: 'callbacks'; ids?: string[]; reason: string } }>(
    '/admin/v1/dead-letters::requeue',
    {
      onRequest: requireAdmin(deps.adminToken),
      schema: {
        tags: ['admin'],
        security: [{ adminToken: [] }],
        summary: 'Send DEAD callbacks again: those named, or the oldest when none is named (audited)',
        description:
          'Each DEAD row named (or, without `ids`, the oldest DEAD rows, up to the `deadLetterRequeueLimit` setting) is put back to be sent now, as `POST /v1/callbacks/{id}:redeliver` does; rows that are not DEAD are left alone. The reason and the ids requeued are kept in the operator audit.',
        body: RequeueRequest,
        response: {
          200: Type.Object({
            table: Type.Literal('callbacks'),
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
        ids: request.body.ids ?? null,
        reason: request.body.reason,
        actor: 'operator',
      }),
  );
}

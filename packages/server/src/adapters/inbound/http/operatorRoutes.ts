/**
 * The operator's actions on nodes and worker sessions beside the session drain (workerRoutes.ts): node
 * drain, cordon and uncordon, and the read of the operator audit. Admin token; every action takes a
 * reason and is audited.
 */
import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import type { OperatorAudit } from '../../../core/operations/ports.ts';
import { AppError } from '../../../core/shared/errors.ts';
import {
  drainNode,
  type OperatorActionDeps,
  setNodeCordon,
  setWorkerCordon,
} from '../../../core/workers/operatorActions.ts';
import { requireAdmin } from './auth.ts';
import { emptyBodyAsObject, problemResponses, Uuid } from './schemas.ts';

const Reason = Type.Object(
  { reason: Type.String({ minLength: 1, maxLength: 2000 }) },
  { additionalProperties: false },
);
const NodeId = Type.Object({ id: Type.String({ minLength: 1, maxLength: 200 }) });
const WorkerId = Type.Object({ id: Uuid });
const admin = { tags: ['admin'], security: [{ adminToken: [] }] };

const AuditEntry = Type.Object({
  id: Type.String(),
  action: Type.String(),
  subjectId: Type.String(),
  actor: Type.String(),
  reason: Type.String(),
  details: Type.Object({}, { additionalProperties: true }),
  createdAt: Type.String({ format: 'date-time' }),
});

/** The audit page cursor: the last row's time and id, opaque to callers. */
const encodeCursor = (at: { createdAt: Date; id: string }) =>
  Buffer.from(`${at.createdAt.toISOString()}|${at.id}`).toString('base64url');
function decodeCursor(cursor: string): { createdAt: Date; id: string } {
  const [at, id] = Buffer.from(cursor, 'base64url').toString().split('|');
  const createdAt = new Date(at ?? '');
  if (Number.isNaN(createdAt.getTime()) || !/^[0-9a-f-]{36}$/i.test(id ?? ''))
    throw new AppError('VALIDATION_FAILED', 'cursor is not one this API gave');
  return { createdAt, id: id as string };
}

export function registerOperatorRoutes(
  app: FastifyInstance,
  deps: { adminToken: string; actions: OperatorActionDeps; audit: OperatorAudit },
): void {
  const onRequest = requireAdmin(deps.adminToken);
  const actor = 'operator';

  app.post<{ Params: { id: string }; Body: { reason: string } }>(
    '/admin/v1/nodes/:id(^[^/]+?)::drain',
    {
      onRequest,
      preValidation: emptyBodyAsObject,
      schema: {
        ...admin,
        summary: 'Drain a node: cordon it and drain each of its worker sessions, with a reason (audited)',
        description:
          'The node is CORDONED (placed on no more, even by a session that registers later) and each live session on it gets a DRAIN command: it finishes its running attempts, takes nothing new and exits. Draining a drained node again answers the same and writes nothing, unless a session is left to drain.',
        params: NodeId,
        body: Reason,
        response: {
          202: Type.Object({
            nodeId: Type.String(),
            auditId: Type.String(),
            workers: Type.Array(Type.Object({ workerId: Type.String(), commandId: Type.String() })),
          }),
          ...problemResponses,
        },
      },
    },
    async (request, reply) =>
      reply
        .code(202)
        .send(
          await drainNode(deps.actions, { nodeId: request.params.id, reason: request.body.reason, actor }),
        ),
  );

  for (const cordoned of [true, false]) {
    const verb = cordoned ? 'cordon' : 'uncordon';
    app.post<{ Params: { id: string }; Body: { reason: string } }>(
      `/admin/v1/workers/:id(^[0-9a-fA-F-]{36})::${verb}`,
      {
        onRequest,
        preValidation: emptyBodyAsObject,
        schema: {
          ...admin,
          summary: cordoned
            ? 'Cordon a worker session: placed on no more, its running work goes on (audited)'
            : 'Uncordon a worker session: placeable again (audited)',
          params: WorkerId,
          body: Reason,
          response: {
            200: Type.Object({
              workerId: Type.String(),
              schedulingStatus: Type.Union([Type.Literal('ELIGIBLE'), Type.Literal('INELIGIBLE')]),
              auditId: Type.String(),
            }),
            ...problemResponses,
          },
        },
      },
      async (request) =>
        setWorkerCordon(deps.actions, {
          workerId: request.params.id,
          cordoned,
          reason: request.body.reason,
          actor,
        }),
    );
    app.post<{ Params: { id: string }; Body: { reason: string } }>(
      `/admin/v1/nodes/:id(^[^/]+?)::${verb}`,
      {
        onRequest,
        preValidation: emptyBodyAsObject,
        schema: {
          ...admin,
          summary: cordoned
            ? 'Cordon a node: none of its sessions is placed on, the running work goes on (audited)'
            : 'Uncordon a node: its sessions are placeable again; a drained one stays DRAINING (audited)',
          params: NodeId,
          body: Reason,
          response: {
            200: Type.Object({
              nodeId: Type.String(),
              status: Type.Union([Type.Literal('ACTIVE'), Type.Literal('CORDONED')]),
              auditId: Type.String(),
            }),
            ...problemResponses,
          },
        },
      },
      async (request) =>
        setNodeCordon(deps.actions, {
          nodeId: request.params.id,
          cordoned,
          reason: request.body.reason,
          actor,
        }),
    );
  }

  app.get<{ Querystring: { subjectId?: string; action?: string; limit?: number; cursor?: string } }>(
    '/admin/v1/audit',
    {
      onRequest,
      schema: {
        ...admin,
        summary: 'The operator audit, newest first: who did which action to what, and why',
        querystring: Type.Object(
          {
            subjectId: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
            action: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })),
            limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 200, default: 50 })),
            cursor: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
          },
          { additionalProperties: false },
        ),
        response: {
          200: Type.Object({
            items: Type.Array(AuditEntry),
            nextCursor: Type.Union([Type.String(), Type.Null()]),
          }),
          ...problemResponses,
        },
      },
    },
    async (request) => {
      const { subjectId, action, limit = 50, cursor } = request.query;
      const page = await deps.audit.auditPage({
        ...(subjectId ? { subjectId } : {}),
        ...(action ? { action } : {}),
        ...(cursor ? { before: decodeCursor(cursor) } : {}),
        limit,
      });
      return {
        items: page.items.map((e) => ({ ...e, createdAt: e.createdAt.toISOString() })),
        nextCursor: page.next ? encodeCursor(page.next) : null,
      };
    },
  );
}

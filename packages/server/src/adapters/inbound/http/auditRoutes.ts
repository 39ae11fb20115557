/**
 * The operator audit, newest first: who did which action to what, when and why, with what it changed.
 * Mounted under the admin API and the dashboard's API. A caller sees the rows of the tenants they reach;
 * the platform's own rows (workers, nodes, operators) only with a platform-wide role.
 */
import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import type { OperatorAudit } from '../../../core/operations/ports.ts';
import { AppError } from '../../../core/shared/errors.ts';
import { type OperatorGate, operatorOf, reachOf } from './operatorAuth.ts';
import { problemResponses, Uuid } from './schemas.ts';

const Timestamp = Type.String({ format: 'date-time' });
const Nullable = <T extends ReturnType<typeof Type.String>>(t: T) => Type.Union([t, Type.Null()]);

const AuditEntry = Type.Object({
  id: Type.String(),
  action: Type.String(),
  subjectId: Type.String(),
  actor: Type.String({ description: "The operator's name when they acted (`bootstrap admin token` for it)" }),
  operatorId: Nullable(Type.String()),
  sessionId: Nullable(Type.String({ description: 'The dashboard session or personal token used' })),
  tenantId: Nullable(Type.String()),
  taskId: Nullable(Type.String()),
  reason: Type.String(),
  before: Type.Unknown(),
  after: Type.Unknown(),
  details: Type.Object({}, { additionalProperties: true }),
  createdAt: Timestamp,
});

const Query = Type.Object(
  {
    operatorId: Type.Optional(Uuid),
    tenantId: Type.Optional(Uuid),
    taskId: Type.Optional(Uuid),
    subjectId: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
    action: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })),
    from: Type.Optional(Timestamp),
    to: Type.Optional(Timestamp),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 200, default: 50 })),
    cursor: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
  },
  { additionalProperties: false },
);

interface AuditQueryString {
  operatorId?: string;
  tenantId?: string;
  taskId?: string;
  subjectId?: string;
  action?: string;
  from?: string;
  to?: string;
  limit?: number;
  cursor?: string;
}

/** The page cursor: the last row's time and id, opaque to callers. */
const encodeCursor = (at: { createdAt: Date; id: string }) =>
  Buffer.from(`${at.createdAt.toISOString()}|${at.id}`).toString('base64url');
function decodeCursor(cursor: string): { createdAt: Date; id: string } {
  const [at, id] = Buffer.from(cursor, 'base64url').toString().split('|');
  const createdAt = new Date(at ?? '');
  if (Number.isNaN(createdAt.getTime()) || !/^[0-9a-f-]{36}$/i.test(id ?? ''))
    throw new AppError('VALIDATION_FAILED', 'cursor is not one this API gave');
  return { createdAt, id: id as string };
}

export function registerAuditRoutes(
  app: FastifyInstance,
  deps: { path: string; gate: OperatorGate; audit: OperatorAudit; hidden?: boolean },
): void {
  app.get<{ Querystring: AuditQueryString }>(
    deps.path,
    {
      onRequest: deps.gate('viewer', 'tenants'),
      schema: deps.hidden
        ? { hide: true, querystring: Query }
        : {
            tags: ['operators'],
            security: [{ adminToken: [] }],
            summary: 'The operator audit, newest first: who did which action to what, and why',
            querystring: Query,
            response: {
              200: Type.Object({ items: Type.Array(AuditEntry), nextCursor: Nullable(Type.String()) }),
              ...problemResponses,
            },
          },
    },
    async (request) => {
      const { operatorId, tenantId, taskId, subjectId, action, from, to, limit = 50, cursor } = request.query;
      const page = await deps.audit.auditPage({
        ...(operatorId ? { operatorId } : {}),
        ...(tenantId ? { tenantId } : {}),
        ...(taskId ? { taskId } : {}),
        ...(subjectId ? { subjectId } : {}),
        ...(action ? { action } : {}),
        ...(from ? { from: new Date(from) } : {}),
        ...(to ? { to: new Date(to) } : {}),
        ...(cursor ? { before: decodeCursor(cursor) } : {}),
        tenants: reachOf(request),
        self: operatorOf(request).operatorId,
        limit,
      });
      return {
        items: page.items.map((e) => ({
          id: e.id,
          action: e.action,
          subjectId: e.subjectId,
          actor: e.actor.name,
          operatorId: e.actor.operatorId,
          sessionId: e.actor.credentialId,
          tenantId: e.tenantId ?? null,
          taskId: e.taskId ?? null,
          reason: e.reason,
          before: e.before ?? null,
          after: e.after ?? null,
          details: e.details,
          createdAt: e.createdAt.toISOString(),
        })),
        nextCursor: page.next ? encodeCursor(page.next) : null,
      };
    },
  );
}

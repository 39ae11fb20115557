/**
 * A person's offline notifications (docs/notifications.md), read and marked with a user token
 * (`POST /v1/user-tokens`), like the other /v1/me routes.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import {
  type InboxDeps,
  listNotifications,
  markAllNotificationsRead,
  markNotificationRead,
} from '../../../core/notifications/inbox.ts';
import { AppError } from '../../../core/shared/errors.ts';
import type { UserPrincipal, UserTokens } from '../../../core/status/ports.ts';
import { problemResponses } from './schemas.ts';

const Notification = Type.Object({
  id: Type.String({ format: 'uuid' }),
  type: Type.Union([
    Type.Literal('TASK_FAILED'),
    Type.Literal('TASK_TIMED_OUT'),
    Type.Literal('ACTION_REQUIRED'),
  ]),
  severity: Type.String(),
  message: Type.String(),
  requiresAction: Type.Boolean(),
  taskId: Type.String({ format: 'uuid' }),
  taskVersion: Type.String(),
  applicationId: Type.String({ format: 'uuid' }),
  createdAt: Type.String({ format: 'date-time' }),
  readAt: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
});

export function registerNotificationRoutes(
  app: FastifyInstance,
  deps: { inbox: InboxDeps; userTokens: UserTokens; pageLimit: number },
): void {
  const tags = ['notifications'];
  const security = [{ userToken: [] }];

  async function user(request: FastifyRequest): Promise<UserPrincipal> {
    const token = /^Bearer\s+(\S+)$/i.exec(request.headers.authorization ?? '')?.[1];
    const principal = token ? await deps.userTokens.verify(token, deps.inbox.clock.now()) : null;
    if (!principal)
      throw new AppError(
        'UNAUTHENTICATED',
        `send a user token (POST /v1/user-tokens) (${request.method} ${request.url.split('?')[0]})`,
      );
    return principal;
  }

  app.get<{ Querystring: { limit?: number; cursor?: string } }>(
    '/v1/me/notifications',
    {
      schema: {
        tags,
        security,
        summary:
          "The user's offline notifications (terminal failures, requests to act): unread first, then newest",
        querystring: Type.Object(
          {
            limit: Type.Optional(Type.Integer({ minimum: 1, maximum: deps.pageLimit, default: 50 })),
            cursor: Type.Optional(Type.String({ maxLength: 200 })),
          },
          { additionalProperties: false },
        ),
        response: {
          200: Type.Object({
            items: Type.Array(Notification),
            unreadCount: Type.Integer(),
            nextCursor: Type.Union([Type.String(), Type.Null()]),
          }),
          ...problemResponses,
        },
      },
    },
    async (request) =>
      listNotifications(deps.inbox, await user(request), {
        limit: request.query.limit ?? 50,
        cursor: request.query.cursor,
      }),
  );

  app.post<{ Params: { id: string } }>(
    '/v1/me/notifications/:id(^[0-9a-fA-F-]{36})::read',
    {
      schema: {
        tags,
        security,
        summary: 'Mark one of your notifications read (marking it again keeps the first time)',
        params: Type.Object({ id: Type.String({ format: 'uuid' }) }),
        response: { 200: Notification, ...problemResponses },
      },
    },
    async (request) => markNotificationRead(deps.inbox, await user(request), request.params.id),
  );

  app.post(
    '/v1/me/notifications::readAll',
    {
      schema: {
        tags,
        security,
        summary: 'Mark all your unread notifications read',
        response: { 200: Type.Object({ marked: Type.Integer() }), ...problemResponses },
      },
    },
    async (request) => markAllNotificationsRead(deps.inbox, await user(request)),
  );
}

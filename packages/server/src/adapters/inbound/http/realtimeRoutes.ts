import type { FastifyInstance } from 'fastify';
import { SignJWT } from 'jose';
import { Type } from 'typebox';
import { channels } from '../../../core/facts/projections.ts';
import type { TaskState } from '../../../core/facts/records.ts';
import type { ApiKeyAuthenticator } from '../../../core/identity/authenticate.ts';
import { reachedApplications, withinReach } from '../../../core/identity/userReach.ts';
import {
  type DetailLeases,
  type SubscriptionPresence,
  takeDetailLease,
} from '../../../core/realtime/detailLeases.ts';
import { AppError } from '../../../core/shared/errors.ts';
import type { Clock } from '../../../core/shared/ports.ts';
import type { Viewer } from '../../../core/status/ports.ts';
import { realtimeUrlOf } from './browserRequests.ts';
import { problemResponses, Uuid } from './schemas.ts';

/**
 * Realtime tokens for the gateway (the `centrifuge` SDK), asked for by an application's backend on behalf
 * of one of its users: a connection token whose server-side subscriptions are the user's task channels
 * (and those of the projects and roles the backend says they act in) within the application's reach (its
 * own; every application's of the tenant with the tenant-wide user view), the tenant's broadcast channel
 * and the system's; and subscription tokens for one task's detail channel, after checking the user — as
 * themselves, or through one of those projects or roles — may see it. Both name the API key that minted
 * them (`akid`): the gateway refuses them once that key is revoked.
 */
export function registerRealtimeRoutes(
  app: FastifyInstance,
  deps: {
    authenticator: ApiKeyAuthenticator;
    key: Uint8Array;
    clock: Clock;
    reads: {
      task(taskId: string): Promise<TaskState | null>;
      canView(taskId: string, viewer: Viewer): Promise<boolean>;
      /** The ids of the tenant's applications. */
      applicationsOf(tenantId: string): Promise<string[]>;
    };
    tokenTtlSeconds?: number;
    /** The WebSocket URL handed out (default: this server's own gateway). */
    wsUrl?: string | null;
    /** Detail channels a connection of the in-process gateway follows (null: not connected here). */
    detailSubscriptions?: (clientId: string) => number | null;
    /**
     * With Centrifugo serving the browsers: the limit is kept by leases shared by the replicas (one per
     * connection and channel, for the token's lifetime), and a request must name its connection.
     */
    detailLeases?: { leases: DetailLeases; presence: SubscriptionPresence | null } | null;
  },
): void {
  const tags = ['realtime'];
  const security = [{ apiKey: [] }];
  const ttl = deps.tokenTtlSeconds ?? 900;
  const sign = (claims: Record<string, unknown>, issuedAt = Math.floor(deps.clock.now().getTime() / 1000)) =>
    new SignJWT(claims)
      .setProtectedHeader({ alg: 'HS256' })
      .setIssuedAt(issuedAt)
      .setExpirationTime(issuedAt + ttl)
      .sign(deps.key);
  const principal = async (authorization: string | undefined) => {
    const token = authorization?.startsWith('Bearer ') ? authorization.slice(7) : null;
    const found = token ? await deps.authenticator.authenticate(token) : null;
    if (!found)
      throw new AppError('UNAUTHENTICATED', 'send an application key as "Authorization: Bearer tdp_…"');
    return found;
  };
  const UserId = Type.String({ minLength: 1, maxLength: 200, pattern: '^[^,#$:/\\s]+$' });
  // The backend vouches for the projects and roles a person acts in, as for `POST /v1/user-tokens`; those
  // that name channels are channel-safe like user ids, those only checked against the ACL are not held to it.
  const Principals = Type.Optional(Type.Array(UserId, { maxItems: 100 }));
  const AclPrincipals = Type.Optional(
    Type.Array(Type.String({ minLength: 1, maxLength: 200 }), { maxItems: 100 }),
  );
  type Acting = { userId: string; projects?: string[]; roles?: string[] };

  app.post<{ Body: Acting }>(
    '/v1/realtime/connection-token',
    {
      schema: {
        tags,
        security,
        summary:
          "A connection token for one of the application's users (their task channels and the broadcast channels are subscribed)",
        body: Type.Object(
          { userId: UserId, projects: Principals, roles: Principals },
          { additionalProperties: false },
        ),
        response: {
          200: Type.Object({ token: Type.String(), url: Type.String(), channels: Type.Array(Type.String()) }),
          ...problemResponses,
        },
      },
    },
    async (request) => {
      const caller = await principal(request.headers.authorization);
      const applications = reachedApplications(
        caller,
        caller.userView === 'TENANT' ? await deps.reads.applicationsOf(caller.tenantId) : [],
      );
      const { userId, projects = [], roles = [] } = request.body;
      const userChannels = [
        ...applications.flatMap((id) => [
          channels.user(caller.tenantId, id, userId),
          ...projects.map((project) => channels.project(caller.tenantId, id, project)),
          ...roles.map((role) => channels.role(caller.tenantId, id, role)),
        ]),
        channels.tenant(caller.tenantId),
        channels.system,
      ];
      return {
        token: await sign({ sub: request.body.userId, channels: userChannels, akid: caller.keyId }),
        url: realtimeUrlOf(request, deps.wsUrl),
        channels: userChannels,
      };
    },
  );

  const detailLimit = 20;
  app.post<{ Body: Acting & { taskId: string; clientId?: string } }>(
    '/v1/realtime/subscription-token',
    {
      schema: {
        tags,
        security,
        summary: "A subscription token for a task's detail channel, if the user may see the task",
        body: Type.Object(
          {
            userId: UserId,
            projects: AclPrincipals,
            roles: AclPrincipals,
            taskId: Uuid,
            clientId: Type.Optional(
              Type.String({
                maxLength: 100,
                description:
                  "The connection's client id (the SDK's `connected` event): checked against the limit of 20 task details (required with Centrifugo)",
              }),
            ),
          },
          { additionalProperties: false },
        ),
        response: { 200: Type.Object({ token: Type.String(), channel: Type.String() }), ...problemResponses },
      },
    },
    async (request) => {
      const caller = await principal(request.headers.authorization);
      const task = await deps.reads.task(request.body.taskId);
      const visible =
        task !== null &&
        withinReach(caller, task.task) &&
        (await deps.reads.canView(request.body.taskId, {
          userId: request.body.userId,
          projects: request.body.projects ?? [],
          roles: request.body.roles ?? [],
        }));
      if (!task || !visible)
        throw new AppError('TASK_NOT_FOUND', `task ${request.body.taskId} does not exist`);
      const channel = channels.detail(caller.tenantId, request.body.taskId);
      const { clientId } = request.body;
      const limitReached = (following: number) =>
        new AppError(
          'DETAIL_SUBSCRIPTION_LIMIT',
          `connection ${clientId} already follows ${following} task details (at most ${detailLimit})`,
        );
      const issuedAt = Math.floor(deps.clock.now().getTime() / 1000);
      if (deps.detailLeases) {
        // Centrifugo cannot count for TDP: the lease is the count, so the connection must be named.
        if (!clientId)
          throw new AppError(
            'VALIDATION_FAILED',
            "clientId is required: pass the SDK's client id (from its connected event), so that a connection follows at most 20 task details",
          );
        const lease = await takeDetailLease(
          deps.detailLeases,
          { clientId, channel, expiresAt: new Date((issuedAt + ttl) * 1000) },
          deps.clock.now(),
          detailLimit,
        );
        if (!lease.taken) throw limitReached(lease.held);
      } else {
        // The gateway refuses the 21st as well (error 106); asking first gives a clear answer.
        const following = clientId ? deps.detailSubscriptions?.(clientId) : null;
        if (following != null && following >= detailLimit) throw limitReached(following);
      }
      return {
        token: await sign({ sub: request.body.userId, channel, akid: caller.keyId }, issuedAt),
        channel,
      };
    },
  );
}

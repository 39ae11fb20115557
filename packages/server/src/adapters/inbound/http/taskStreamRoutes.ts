/**
 * Live status for a plain EventSource (docs/realtime.md), with a user token:
 *
 * - `GET /v1/me/task-stream` streams the summaries of the person's tasks (their user channel and those
 *   of their projects and roles, of each application within the token's reach) as server-sent events. The first event is `{kind: "stream.ready",
 *   sessionId}`. Each task event's `id` is a cursor of the stream's positions: a reconnect with
 *   `Last-Event-ID` gets what it missed, or `{kind: "stream.reset"}` when that is gone (then reload
 *   `GET /v1/me/tasks`).
 * - `PUT /v1/me/task-watch-set` names up to 20 tasks whose details the stream also carries. It is bound
 *   to the user and the stream (`sessionId`), checked against the task ACL, and expires unless renewed;
 *   a task whose view is revoked leaves it at once (every replica hears of the revocation), and a
 *   revoked API key ends the streams of the user tokens it minted.
 *
 * Streams live in the process that serves them. With `shared` sessions (when Centrifugo serves the
 * browsers and the replicas scale out), a watch-set PUT may reach any replica: it is checked there,
 * stored, and applied by the replica holding the stream. Without, route a session's requests to the
 * replica holding it (the watch-set answers 404 WATCH_SESSION_NOT_FOUND elsewhere).
 */
import { randomUUID } from 'node:crypto';
import type { Gateway, InternalClient, StreamPosition } from '@tdp/gateway';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import { channels } from '../../../core/facts/projections.ts';
import type { TaskState } from '../../../core/facts/records.ts';
import type { Revocations } from '../../../core/identity/ports.ts';
import { reachedApplications, withinReach } from '../../../core/identity/userReach.ts';
import type { SharedStreamSessions, StreamSessionRecord } from '../../../core/realtime/streamSessions.ts';
import { AppError } from '../../../core/shared/errors.ts';
import type { Clock } from '../../../core/shared/ports.ts';
import type { UserPrincipal, UserTokens, Viewer } from '../../../core/status/ports.ts';
import { eventStream, problemResponses, Uuid } from './schemas.ts';

export interface TaskStreamDeps {
  gateway: Gateway;
  userTokens: UserTokens;
  clock: Clock;
  reads: {
    task(taskId: string): Promise<TaskState | null>;
    canView(taskId: string, viewer: Viewer): Promise<boolean>;
    /** The ids of the tenant's applications. */
    applicationsOf(tenantId: string): Promise<string[]>;
  };
  /** How long a watch-set lasts unless it is PUT again. */
  watchTtlMs?: number;
  keepAliveMs: number;
  /** Streams every replica knows of, so a watch-set PUT may reach any of them (null: this one's only). */
  shared?: SharedStreamSessions | null;
  /**
   * Revocations heard by every replica: a revoked API key ends the streams of the user tokens it minted,
   * a revoked view of a task drops it from the watch sets of those who no longer see it.
   */
  revocations?: Pick<Revocations, 'subscribe'>;
}

interface StreamSession {
  id: string;
  user: UserPrincipal;
  client: InternalClient;
  watched: Set<string>;
  watchExpiry: NodeJS.Timeout | null;
  /** Shared: the expiry of the stored watch set applied last (a stored one that differs is newer). */
  appliedWatchUntil: number | null;
  /** Ends the stream (the EventSource reconnects, and its token is checked again). */
  end(): void;
}

const watchLimit = 20;

/** The stream's positions, one per base channel in order, as a compact Last-Event-ID. */
const encodeCursor = (positions: (StreamPosition | null)[]) =>
  Buffer.from(JSON.stringify(positions.map((p) => (p ? [p.offset, p.epoch] : null)))).toString('base64url');

function decodeCursor(cursor: string, count: number): (StreamPosition | null)[] | null {
  try {
    const list = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as unknown;
    if (!Array.isArray(list) || list.length !== count) return null;
    return list.map((entry) =>
      Array.isArray(entry) && typeof entry[0] === 'number' && typeof entry[1] === 'string'
        ? { offset: entry[0], epoch: entry[1] }
        : null,
    );
  } catch {
    return null;
  }
}

export function registerTaskStreamRoutes(app: FastifyInstance, deps: TaskStreamDeps): void {
  const sessions = new Map<string, StreamSession>();
  const tags = ['realtime'];
  const watchTtl = deps.watchTtlMs ?? 10 * 60_000;

  /** Follows the details of `taskIds` (checked already) on the stream until `expiresAt`. */
  async function applyWatch(session: StreamSession, taskIds: string[], expiresAt: Date) {
    const { tenantId } = session.user;
    const wanted = new Set(taskIds);
    for (const taskId of session.watched)
      if (!wanted.has(taskId)) session.client.unsubscribe(channels.detail(tenantId, taskId));
    for (const taskId of wanted)
      if (!session.watched.has(taskId)) await session.client.subscribe(channels.detail(tenantId, taskId));
    session.watched = wanted;
    if (session.watchExpiry) clearTimeout(session.watchExpiry);
    session.watchExpiry = setTimeout(
      () => {
        for (const taskId of session.watched) session.client.unsubscribe(channels.detail(tenantId, taskId));
        session.watched = new Set();
      },
      Math.max(0, expiresAt.getTime() - deps.clock.now().getTime()),
    );
    session.watchExpiry.unref();
  }

  /** Whether the stream's person still sees the task (as when the watch set was PUT). */
  async function stillSees(session: StreamSession, taskId: string): Promise<boolean> {
    const task = await deps.reads.task(taskId);
    return (
      task !== null &&
      withinReach(session.user, task.task) &&
      (await deps.reads.canView(taskId, session.user.viewer))
    );
  }

  /** A revoked view: the task leaves the watch sets of the streams here whose person no longer sees it. */
  async function dropRevoked(tenantId: string, taskId: string): Promise<void> {
    for (const session of sessions.values()) {
      if (session.user.tenantId !== tenantId || !session.watched.has(taskId)) continue;
      if (await stillSees(session, taskId)) continue;
      session.watched.delete(taskId);
      session.client.unsubscribe(channels.detail(tenantId, taskId));
    }
  }

  deps.revocations?.subscribe((revocation) => {
    if (revocation.kind === 'apiKey') {
      for (const session of sessions.values()) if (session.user.keyId === revocation.keyId) session.end();
    } else if (revocation.kind === 'taskAccess') {
      void dropRevoked(revocation.tenantId, revocation.taskId).catch((error) =>
        app.log.warn({ err: error }, 'could not drop a revoked task from the watch sets'),
      );
    }
  });

  const shared = deps.shared;
  if (shared) {
    /** Applies the stored watch set of a stream held here, unless it is the one applied already. */
    const applyStored = (record: StreamSessionRecord) => {
      const session = sessions.get(record.sessionId);
      const until = record.watchExpiresAt?.getTime() ?? null;
      if (!session || until === null || until === session.appliedWatchUntil) return;
      session.appliedWatchUntil = until;
      if (until <= deps.clock.now().getTime()) return; // expired: its timer here has cleared it
      void applyWatch(session, record.taskIds, new Date(until)).catch((error) =>
        app.log.warn({ err: error }, 'could not apply a watch set stored elsewhere'),
      );
    };
    // A watch set stored by another replica, for a stream held here: the NOTIFY wakes, the row decides.
    const unlisten = shared.onWatchChanged((sessionId) => {
      if (!sessions.has(sessionId)) return;
      void shared
        .find(sessionId, deps.clock.now())
        .then((record) => record && applyStored(record))
        .catch((error) => app.log.warn({ err: error }, 'could not read a watch set stored elsewhere'));
    });
    // The streams held here stay findable while they are open (one statement per interval for all), and
    // a watch set whose NOTIFY was lost is applied then.
    const aliveFor = () => new Date(deps.clock.now().getTime() + 4 * deps.keepAliveMs);
    const renewal = setInterval(() => {
      shared
        .keepAlive([...sessions.keys()], aliveFor())
        .then((records) => {
          for (const record of records) applyStored(record);
        })
        .catch(() => {});
    }, deps.keepAliveMs);
    renewal.unref();
    app.addHook('onClose', async () => {
      clearInterval(renewal);
      await (await unlisten)().catch(() => {});
    });
  }

  /** A user token from `Authorization: Bearer` or, for EventSource, `?access_token=`. */
  async function user(request: FastifyRequest): Promise<UserPrincipal> {
    const header = /^Bearer\s+(\S+)$/i.exec(request.headers.authorization ?? '')?.[1];
    const query = (request.query as { access_token?: string } | undefined)?.access_token;
    const token = header ?? query;
    const principal = token ? await deps.userTokens.verify(token, deps.clock.now()) : null;
    if (!principal)
      throw new AppError(
        'UNAUTHENTICATED',
        'send a user token (POST /v1/user-tokens) as "Authorization: Bearer <token>" or ?access_token=',
      );
    return principal;
  }

  app.get<{ Querystring: { access_token?: string } }>(
    '/v1/me/task-stream',
    {
      schema: {
        tags,
        security: [{ userToken: [] }],
        summary: "The person's task summaries as server-sent events; resumes after Last-Event-ID",
        querystring: Type.Object(
          { access_token: Type.Optional(Type.String({ maxLength: 4000 })) },
          { additionalProperties: false },
        ),
        response: { 200: eventStream },
      },
    },
    async (request, reply) => {
      const principal = await user(request);
      const { tenantId, viewer } = principal;
      const applications = reachedApplications(
        principal,
        principal.userView === 'TENANT' ? await deps.reads.applicationsOf(tenantId) : [],
      );
      const base = applications.flatMap((app) => [
        channels.user(tenantId, app, viewer.userId),
        ...viewer.projects.map((p) => channels.project(tenantId, app, p)),
        ...viewer.roles.map((r) => channels.role(tenantId, app, r)),
      ]);
      const lastEventId = request.headers['last-event-id'];
      const since = typeof lastEventId === 'string' ? decodeCursor(lastEventId, base.length) : null;

      reply.hijack();
      const raw = reply.raw;
      raw.writeHead(200, {
        'content-type': 'text/event-stream; charset=utf-8',
        'cache-control': 'no-cache, no-store',
        connection: 'keep-alive',
        'x-accel-buffering': 'no',
      });
      const write = (data: unknown, id?: string) => {
        if (!raw.writableEnded) raw.write(`${id ? `id: ${id}\n` : ''}data: ${JSON.stringify(data)}\n\n`);
      };
      const baseSet = new Set(base);
      const client: InternalClient = deps.gateway.openInternal(viewer.userId, {
        onPublication: (channel, publication) => {
          // Summaries carry the cursor; a watched task's details do not move it.
          write(
            publication.data,
            baseSet.has(channel) ? encodeCursor(base.map((c) => client.position(c))) : undefined,
          );
        },
        onReset: (channel) => write({ kind: 'stream.reset', channel }),
      });
      const session: StreamSession = {
        id: randomUUID(),
        user: principal,
        client,
        watched: new Set(),
        watchExpiry: null,
        appliedWatchUntil: null,
        end: () => raw.end(),
      };
      sessions.set(session.id, session);
      const keepAlive = setInterval(() => raw.write(': keep-alive\n\n'), deps.keepAliveMs);
      let opened: Promise<void> = Promise.resolve();
      raw.on('close', () => {
        clearInterval(keepAlive);
        if (session.watchExpiry) clearTimeout(session.watchExpiry);
        session.client.close();
        sessions.delete(session.id);
        if (shared) void opened.then(() => shared.close(session.id)).catch(() => {});
      });
      if (shared) {
        opened = shared.open(
          { sessionId: session.id, tenantId, applicationId: principal.applicationId, userId: viewer.userId },
          new Date(deps.clock.now().getTime() + 4 * deps.keepAliveMs),
        );
        // Until it is known everywhere, a watch-set PUT elsewhere would not find it: ready comes after.
        await opened.catch((error) => app.log.warn({ err: error }, 'could not share a task stream'));
      }
      write({ kind: 'stream.ready', sessionId: session.id, channels: base, watchLimit });
      let recovered = true;
      for (const [index, channel] of base.entries()) {
        const from = since?.[index] ?? undefined;
        recovered = (await session.client.subscribe(channel, from)) && recovered;
      }
      // A cursor that is not this stream's, or positions the history no longer holds.
      if ((typeof lastEventId === 'string' && !since) || !recovered) write({ kind: 'stream.reset' });
    },
  );

  app.put<{ Body: { sessionId: string; taskIds: string[] } }>(
    '/v1/me/task-watch-set',
    {
      schema: {
        tags,
        security: [{ userToken: [] }],
        summary: 'The tasks whose details the task stream carries (at most 20; expires unless renewed)',
        body: Type.Object(
          {
            sessionId: Type.String({ maxLength: 100 }),
            taskIds: Type.Array(Uuid, { maxItems: watchLimit, uniqueItems: true }),
          },
          { additionalProperties: false },
        ),
        response: {
          200: Type.Object({
            sessionId: Type.String(),
            taskIds: Type.Array(Type.String()),
            expiresAt: Type.String(),
          }),
          ...problemResponses,
        },
      },
    },
    async (request) => {
      const principal = await user(request);
      const session = sessions.get(request.body.sessionId);
      // Held here, or (shared) by another replica.
      const owner = session
        ? { userId: session.user.viewer.userId, applicationId: session.user.applicationId }
        : await shared?.find(request.body.sessionId, deps.clock.now());
      if (
        !owner ||
        owner.userId !== principal.viewer.userId ||
        owner.applicationId !== principal.applicationId
      )
        throw new AppError(
          'WATCH_SESSION_NOT_FOUND',
          `no task stream ${request.body.sessionId} of yours is open ${shared ? 'now' : 'here'}`,
        );
      // Every task is checked before anything changes.
      for (const taskId of request.body.taskIds) {
        const task = await deps.reads.task(taskId);
        const visible =
          task !== null &&
          withinReach(principal, task.task) &&
          (await deps.reads.canView(taskId, principal.viewer));
        if (!visible) throw new AppError('TASK_NOT_FOUND', `task ${taskId} does not exist`);
      }
      const expiresAt = new Date(deps.clock.now().getTime() + watchTtl);
      const taskIds = [...new Set(request.body.taskIds)];
      // Shared, the stored set is the truth wherever the PUT came in; the holder applies it.
      if (shared) await shared.setWatch(request.body.sessionId, taskIds, expiresAt);
      if (session) {
        session.appliedWatchUntil = expiresAt.getTime();
        await applyWatch(session, taskIds, expiresAt);
      }
      return { sessionId: request.body.sessionId, taskIds, expiresAt: expiresAt.toISOString() };
    },
  );
}

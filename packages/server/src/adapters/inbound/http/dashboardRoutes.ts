/**
 * The operator dashboard's API (`/dashboard/api`) and its built pages (`/dashboard/`). An operator logs
 * in with the admin token once; the answer is a short-lived session cookie (HttpOnly, SameSite=Strict),
 * so the token never lives in the browser. Everything here reads across tenants: it is the operator's
 * view of tasks, workers and the pipeline's health.
 */
import { timingSafeEqual } from 'node:crypto';
import fastifyStatic from '@fastify/static';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { jwtVerify, SignJWT } from 'jose';
import { channels } from '../../../core/facts/projections.ts';
import type { TaskState } from '../../../core/facts/records.ts';
import { toTaskView } from '../../../core/facts/views.ts';
import { AppError } from '../../../core/shared/errors.ts';
import type { Clock } from '../../../core/shared/ports.ts';
import type { PostgresCallbackQueue } from '../../outbound/postgres/callbackQueue.ts';
import type { Sql } from '../../outbound/postgres/database.ts';
import type { ClaimableRows } from '../../outbound/postgres/outboxQueue.ts';
import { callbackLogOf, timelineOf } from './runRoutes.ts';

export interface DashboardDeps {
  sql: Sql;
  callbacks: PostgresCallbackQueue;
  /** The three outbox-like tables, for the pipeline health page. */
  pipeline: { outbox: ClaimableRows; realtime: ClaimableRows; callbacks: ClaimableRows };
  adminToken: string;
  /** Signs operator sessions (derived from the keyring). */
  sessionKey: Uint8Array;
  /** Signs the operator's realtime connection tokens (the gateway's key). */
  realtimeKey: Uint8Array;
  clock: Clock;
  task(taskId: string): Promise<TaskState | null>;
  unschedulableReasons(taskId: string): Promise<Map<string, string[]>>;
  listWorkers(): Promise<Record<string, unknown>[]>;
  /** Built pages (packages/dashboard/dist); null when they are not built. */
  pagesDirectory: string | null;
  wsUrl?: string | null;
  sessionTtlSeconds?: number;
}

const cookieName = 'tdp_operator';
const statuses = ['PENDING', 'RUNNING', 'SUCCEEDED', 'FAILED', 'CANCELLED', 'TIMED_OUT'] as const;

const sameSecret = (given: string, expected: string) => {
  const a = Buffer.from(given);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
};

export function registerDashboardRoutes(app: FastifyInstance, deps: DashboardDeps): void {
  const ttl = deps.sessionTtlSeconds ?? 8 * 3600;
  const nowSeconds = () => Math.floor(deps.clock.now().getTime() / 1000);

  const operator = async (request: FastifyRequest): Promise<void> => {
    const cookie = request.headers.cookie ?? '';
    const token = new RegExp(`(?:^|;\\s*)${cookieName}=([^;]+)`).exec(cookie)?.[1];
    if (!token) throw new AppError('UNAUTHENTICATED', 'log in to the dashboard with the admin token');
    try {
      await jwtVerify(token, deps.sessionKey, {
        audience: 'tdp-dashboard',
        currentDate: deps.clock.now(),
      });
    } catch {
      throw new AppError('UNAUTHENTICATED', 'the dashboard session expired; log in again');
    }
  };
  const onRequest = async (request: FastifyRequest) => operator(request);
  const hidden = { hide: true };

  app.post<{ Body: { token?: unknown } }>(
    '/dashboard/api/login',
    { schema: hidden },
    async (request, reply) => {
      const token = typeof request.body?.token === 'string' ? request.body.token : '';
      if (!token || !sameSecret(token, deps.adminToken))
        throw new AppError('UNAUTHENTICATED', 'that is not the admin token');
      const session = await new SignJWT({ role: 'operator' })
        .setProtectedHeader({ alg: 'HS256' })
        .setAudience('tdp-dashboard')
        .setIssuedAt(nowSeconds())
        .setExpirationTime(nowSeconds() + ttl)
        .sign(deps.sessionKey);
      return reply
        .header(
          'set-cookie',
          `${cookieName}=${session}; Path=/dashboard; HttpOnly; SameSite=Strict; Max-Age=${ttl}`,
        )
        .send({ expiresAt: new Date((nowSeconds() + ttl) * 1000).toISOString() });
    },
  );

  app.post('/dashboard/api/logout', { schema: hidden }, async (_request, reply) =>
    reply
      .header('set-cookie', `${cookieName}=; Path=/dashboard; HttpOnly; SameSite=Strict; Max-Age=0`)
      .send({ ok: true }),
  );

  app.get('/dashboard/api/me', { schema: hidden, onRequest }, async () => ({ role: 'operator' }));

  /** The operator's live feed: every task's summary, on one channel only operators get a token for. */
  app.get('/dashboard/api/realtime-token', { schema: hidden, onRequest }, async (request) => {
    const token = await new SignJWT({ sub: 'operator', channels: [channels.operator] })
      .setProtectedHeader({ alg: 'HS256' })
      .setIssuedAt(nowSeconds())
      .setExpirationTime(nowSeconds() + 900)
      .sign(deps.realtimeKey);
    return {
      token,
      url: deps.wsUrl ?? `ws://${request.headers.host}/connection/websocket`,
      channel: channels.operator,
    };
  });

  // Newest tasks first (ids are time-ordered UUIDv7, so this walks the primary key); the page moves a
  // task that changes to the top live.
  app.get<{ Querystring: { status?: string; applicationId?: string; workflow?: string; limit?: string } }>(
    '/dashboard/api/tasks',
    { schema: hidden, onRequest },
    async (request) => {
      const { status, applicationId, workflow } = request.query;
      if (status && !(statuses as readonly string[]).includes(status))
        throw new AppError('VALIDATION_FAILED', `status must be one of ${statuses.join(', ')}`);
      if (applicationId && !/^[0-9a-f-]{36}$/i.test(applicationId))
        throw new AppError('VALIDATION_FAILED', 'applicationId must be a UUID');
      const limit = Math.min(Math.max(Number(request.query.limit ?? 100) || 100, 1), 500);
      const sql = deps.sql;
      const byApplication = applicationId ? sql`AND t.application_id = ${applicationId}` : sql``;
      const byWorkflow = workflow ? sql`AND t.workflow_name = ${workflow}` : sql``;
      const byStatus = status ? sql`AND t.lifecycle_status = ${status}` : sql``;
      const [items, counts, applications, workflows] = await Promise.all([
        sql`
          SELECT t.id, t.tenant_id, t.application_id, a.name AS application_name, t.workflow_name,
                 t.workflow_version, t.name, t.lifecycle_status, t.health, t.version, t.failure,
                 t.created_at, t.updated_at, t.started_at, t.finished_at, e.progress, e.number AS execution_number
          FROM task t
          JOIN execution e ON e.id = t.current_execution_id
          JOIN application a ON a.id = t.application_id
          WHERE true ${byApplication} ${byWorkflow} ${byStatus}
          ORDER BY t.id DESC
          LIMIT ${limit}`,
        sql<{ lifecycle_status: string; n: number }[]>`
          SELECT t.lifecycle_status, count(*)::int AS n FROM task t
          WHERE true ${byApplication} ${byWorkflow}
          GROUP BY t.lifecycle_status`,
        sql`SELECT id, name, tenant_id FROM application ORDER BY name`,
        sql<{ workflow_name: string }[]>`
          SELECT DISTINCT name AS workflow_name FROM workflow_definition ORDER BY name`,
      ]);
      return {
        items: items.map((t) => ({
          id: t.id,
          tenantId: t.tenant_id,
          applicationId: t.application_id,
          applicationName: t.application_name,
          workflowName: t.workflow_name,
          workflowVersion: t.workflow_version,
          name: t.name,
          lifecycleStatus: t.lifecycle_status,
          health: t.health,
          version: String(t.version),
          progress: t.progress,
          executionNumber: t.execution_number,
          failure: t.failure,
          createdAt: t.created_at.toISOString(),
          updatedAt: t.updated_at.toISOString(),
          startedAt: t.started_at?.toISOString() ?? null,
          finishedAt: t.finished_at?.toISOString() ?? null,
        })),
        counts: Object.fromEntries(
          statuses.map((s) => [s, counts.find((c) => c.lifecycle_status === s)?.n ?? 0]),
        ),
        applications: applications.map((a) => ({ id: a.id, name: a.name, tenantId: a.tenant_id })),
        workflows: workflows.map((w) => w.workflow_name),
      };
    },
  );

  app.get<{ Params: { id: string } }>(
    '/dashboard/api/tasks/:id',
    { schema: hidden, onRequest },
    async (request) => {
      const id = request.params.id;
      if (!/^[0-9a-f-]{36}$/i.test(id)) throw new AppError('TASK_NOT_FOUND', `task ${id} does not exist`);
      const state = await deps.task(id);
      if (!state) throw new AppError('TASK_NOT_FOUND', `task ${id} does not exist`);
      const view = toTaskView(state);
      const [reasons, attempts, timeline, callbacks] = await Promise.all([
        deps.unschedulableReasons(id),
        deps.sql`
          SELECT a.id, s.step_key, s.attempt, a.worker_id, w.name AS worker_name, w.node_id, a.lease_version,
                 a.created_at, a.revoked_at, s.status, s.started_at, s.finished_at
          FROM attempt a
          JOIN step s ON s.id = a.step_id
          LEFT JOIN worker w ON w.id = a.worker_id
          WHERE a.task_id = ${id}
          ORDER BY a.created_at`,
        timelineOf(deps.sql, id),
        callbackLogOf(deps.callbacks, id),
      ]);
      return {
        ...view,
        execution: {
          ...view.execution,
          steps: view.execution.steps.map((step) => ({
            ...step,
            ...(step.status === 'READY' || step.status === 'QUEUED'
              ? { unschedulableReasons: reasons.get(step.id) ?? [] }
              : {}),
          })),
        },
        // The DAG as frozen into this execution.
        dag: state.execution.snapshot.steps.map((s) => ({
          key: s.key,
          dependsOn: s.dependsOn ?? [],
          capability: s.capability ?? null,
        })),
        attempts: attempts.map((a) => ({
          id: a.id,
          stepKey: a.step_key,
          attempt: a.attempt,
          workerId: a.worker_id,
          workerName: a.worker_name,
          nodeId: a.node_id,
          leaseVersion: a.lease_version,
          status: a.status,
          createdAt: a.created_at.toISOString(),
          startedAt: a.started_at?.toISOString() ?? null,
          finishedAt: a.finished_at?.toISOString() ?? null,
          revokedAt: a.revoked_at?.toISOString() ?? null,
        })),
        timeline,
        callbacks,
      };
    },
  );

  app.get('/dashboard/api/workers', { schema: hidden, onRequest }, async () => {
    const [workers, queued] = await Promise.all([
      deps.listWorkers(),
      deps.sql`
        SELECT r.task_id, t.name AS task_name, s.step_key, s.capability, s.capability_version, r.reasons, r.created_at
        FROM scheduling_request r
        JOIN step s ON s.id = r.step_id
        JOIN task t ON t.id = r.task_id
        WHERE r.status = 'PENDING'
        ORDER BY r.created_at LIMIT 200`,
    ]);
    return {
      workers,
      queued: queued.map((q) => ({
        taskId: q.task_id,
        taskName: q.task_name,
        stepKey: q.step_key,
        capability: `${q.capability}@${q.capability_version}`,
        reasons: q.reasons,
        waitingSince: q.created_at.toISOString(),
      })),
    };
  });

  app.get('/dashboard/api/health', { schema: hidden, onRequest }, async () => {
    const now = deps.clock.now();
    // Waiting = claimable or claimed now; DEAD = gave up. Counted the way the metrics count them.
    const line = async (rows: ClaimableRows) => {
      const [counts, oldestSeconds] = await Promise.all([
        rows.countByStatus(),
        rows.oldestUnpublishedAgeSeconds(now),
      ]);
      const waiting = (counts.PENDING ?? 0) + (counts.FAILED ?? 0) + (counts.PUBLISHING ?? 0);
      return {
        backlog: waiting,
        dead: counts.DEAD ?? 0,
        oldestAgeMs: waiting > 0 ? oldestSeconds * 1000 : null,
      };
    };
    const [outbox, realtime, callbacks, [stale], [queued]] = await Promise.all([
      line(deps.pipeline.outbox),
      line(deps.pipeline.realtime),
      line(deps.pipeline.callbacks),
      deps.sql<
        { n: number }[]
      >`SELECT count(*)::int AS n FROM step WHERE health = 'STALE' AND status = 'RUNNING'`,
      deps.sql<{ n: number; oldest: Date | null }[]>`
        SELECT count(*)::int AS n, min(created_at) AS oldest FROM scheduling_request WHERE status = 'PENDING'`,
    ]);
    return {
      outbox,
      realtime,
      callbacks,
      staleSteps: stale?.n ?? 0,
      queuedSteps: {
        count: queued?.n ?? 0,
        oldestAgeMs: queued?.oldest ? Math.max(0, now.getTime() - queued.oldest.getTime()) : null,
      },
    };
  });

  app.get('/dashboard/api/workflow-definitions', { schema: hidden, onRequest }, async () => {
    const rows = await deps.sql`
      SELECT d.id, d.name, d.version, d.steps, d.published_at, t.name AS tenant_name
      FROM workflow_definition d JOIN tenant t ON t.id = d.tenant_id
      ORDER BY d.name, d.published_at DESC`;
    return {
      items: rows.map((d) => ({
        id: d.id,
        name: d.name,
        version: d.version,
        tenantName: d.tenant_name,
        steps: (d.steps as { key: string; capability?: string; dependsOn?: string[] }[]).map((s) => ({
          key: s.key,
          capability: s.capability ?? null,
          dependsOn: s.dependsOn ?? [],
        })),
        publishedAt: d.published_at.toISOString(),
      })),
    };
  });

  // The pages: the build's files (the app routes on the client with `#/…`, so no fallback is needed).
  app.get('/dashboard', { schema: hidden }, async (_request, reply) => reply.redirect('/dashboard/'));
  if (deps.pagesDirectory)
    void app.register(fastifyStatic, {
      root: deps.pagesDirectory,
      prefix: '/dashboard/',
      decorateReply: false,
      setHeaders: (response, path) =>
        response.header(
          'cache-control',
          path.includes('/assets/') ? 'public, max-age=31536000, immutable' : 'no-cache',
        ),
    });
  else
    app.get('/dashboard/*', { schema: hidden }, async (_request, reply) =>
      reply
        .type('text/plain; charset=utf-8')
        .code(503)
        .send(
          'The dashboard is not built: run `npm run build -w @tdp/dashboard` (npm start does it for you).',
        ),
    );
}

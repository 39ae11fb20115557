/**
 * The operator dashboard's API (`/dashboard/api`) and its built pages (`/dashboard/`). An operator logs
 * in with the admin token once; the answer is a session cookie (HttpOnly, SameSite=Strict, and `Secure`
 * with the `__Host-` prefix over TLS) naming a session kept on the server, so the token never lives in
 * the browser and logging out ends the session at once. Every state change also needs the page's origin
 * and the session's CSRF token (browserRequests.ts). Everything here reads across tenants: it is the
 * operator's view of tasks, workers and the pipeline's health.
 */
import { timingSafeEqual } from 'node:crypto';
import fastifyStatic from '@fastify/static';
import type { StructuredError } from '@tdp/protocol';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { SignJWT } from 'jose';
import { channels } from '../../../core/facts/projections.ts';
import type { TaskState } from '../../../core/facts/records.ts';
import { publicError, toTaskView } from '../../../core/facts/views.ts';
import {
  closeOperatorSession,
  csrfTokenMatches,
  type OperatorSessionDeps,
  openOperatorSession,
  csrfTokenOf as sessionCsrfToken,
  useOperatorSession,
} from '../../../core/identity/operatorSessions.ts';
import type { ChartReads } from '../../../core/operations/charts.ts';
import { pipelineLine } from '../../../core/operations/charts.ts';
import type {
  CallbackDeliveries,
  DashboardReads,
  EngineBridgeReads,
  PipelineRows,
  TaskRunReads,
} from '../../../core/operations/ports.ts';
import { type ApprovalDeps, decideApproval } from '../../../core/orchestration/kinds/approval.ts';
import { type SignalDeps, sendSignal } from '../../../core/orchestration/kinds/signal.ts';
import type { ArchivedTasks } from '../../../core/retention/ports.ts';
import { listAllSchedules, type ScheduleDeps } from '../../../core/schedules/schedules.ts';
import { AppError, archivedTaskError } from '../../../core/shared/errors.ts';
import type { Clock } from '../../../core/shared/ports.ts';
import type { WorkerDeps } from '../../../core/workers/workers.ts';
import {
  changesState,
  cookieOf,
  csrfRejected,
  csrfTokenOf,
  overTls,
  realtimeUrlOf,
  refuseCrossSite,
} from './browserRequests.ts';
import { registerDashboardChartRoutes } from './dashboardChartRoutes.ts';
import { type DashboardOperatorActions, registerDashboardOperatorRoutes } from './dashboardOperatorRoutes.ts';
import { callbackLogOf, timelineOf } from './runRoutes.ts';
import { originOf, securityHeaders, sendSecurityHeaders } from './securityHeaders.ts';
import { listWorkerViews } from './workerRoutes.ts';

export interface DashboardDeps {
  reads: DashboardReads;
  /** A task's timeline. */
  runs: TaskRunReads;
  callbacks: CallbackDeliveries;
  /** The three outbox-like tables, for the pipeline health page. */
  pipeline: { outbox: PipelineRows; realtime: PipelineRows; callbacks: PipelineRows };
  /** The pipeline page's charts (task counts over time, gauge samples). */
  charts: ChartReads;
  /** The Temporal engine's bridge backlog; null when Temporal is not set up. */
  temporalBridge?: EngineBridgeReads | null;
  adminToken: string;
  /** The operators' sessions, kept on the server. */
  sessions: OperatorSessionDeps;
  /** Signs the operator's realtime connection tokens (the gateway's key). */
  realtimeKey: Uint8Array;
  clock: Clock;
  /** Tasks as the status service reads them; an archived one answers with its tombstone (410). */
  tasks: { task(taskId: string): Promise<TaskState | null> };
  archived: ArchivedTasks;
  unschedulableReasons(taskId: string): Promise<Map<string, string[]>>;
  workers: WorkerDeps;
  /** Every application's schedules with their next fire times. */
  schedules: ScheduleDeps;
  /** The operator's decisions on waiting approval steps and signals to tasks (with a reason; audited). */
  approvals: ApprovalDeps & SignalDeps;
  /** Drain, cordon, requeue dead letters (with a reason; audited). */
  operatorActions: DashboardOperatorActions;
  /** Built pages (packages/dashboard/dist); null when they are not built. */
  pagesDirectory: string | null;
  wsUrl?: string | null;
}

/** Over TLS the cookie is `__Host-` (Secure, Path=/, no Domain: no other host or plain-http page can set it). */
const cookieName = 'tdp_operator';
const secureCookieName = `__Host-${cookieName}`;
const statuses = ['PENDING', 'RUNNING', 'SUCCEEDED', 'FAILED', 'CANCELLED', 'TIMED_OUT'] as const;

const sameSecret = (given: string, expected: string) => {
  const a = Buffer.from(given);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
};

/**
 * A failure as operators see it: the message for people (checked as everywhere) and, beside it, the
 * technical detail kept with it — which the public task view, callbacks and realtime never carry.
 */
function operatorError(error: StructuredError | null | undefined) {
  const shown = publicError(error ?? null);
  return shown ? { ...shown, detail: error?.detail ?? null } : null;
}

export function registerDashboardRoutes(app: FastifyInstance, deps: DashboardDeps): void {
  const nowSeconds = () => Math.floor(deps.clock.now().getTime() / 1000);
  const sessionIdOf = (request: FastifyRequest) =>
    cookieOf(request, secureCookieName) ?? cookieOf(request, cookieName);
  const sessionCookie = (request: FastifyRequest, value: string, maxAgeSeconds: number) =>
    overTls(request)
      ? `${secureCookieName}=${value}; Path=/; Secure; HttpOnly; SameSite=Strict; Max-Age=${maxAgeSeconds}`
      : `${cookieName}=${value}; Path=/dashboard; HttpOnly; SameSite=Strict; Max-Age=${maxAgeSeconds}`;
  const requireCsrfToken = (request: FastifyRequest, sessionId: string) => {
    if (!csrfTokenMatches(deps.sessions, sessionId, csrfTokenOf(request))) throw csrfRejected();
  };

  /** Every route but login and logout: a live session, and for a state change its origin and token. */
  const operator = async (request: FastifyRequest): Promise<void> => {
    if (changesState(request)) refuseCrossSite(request);
    const id = sessionIdOf(request);
    if (!id) throw new AppError('UNAUTHENTICATED', 'log in to the dashboard with the admin token');
    if (!(await useOperatorSession(deps.sessions, id)))
      throw new AppError('UNAUTHENTICATED', 'the dashboard session ended; log in again');
    if (changesState(request)) requireCsrfToken(request, id);
  };
  const onRequest = async (request: FastifyRequest) => operator(request);
  const hidden = { hide: true };

  // The live feed's WebSocket may be on another origin (Centrifugo): the pages' policy lets them reach it.
  const realtimeOrigin = deps.wsUrl ? originOf(deps.wsUrl) : null;
  if (realtimeOrigin) sendSecurityHeaders(app, securityHeaders([realtimeOrigin]));

  app.post<{ Body: { token?: unknown } }>(
    '/dashboard/api/login',
    { schema: hidden, config: { credentialInBody: true } },
    async (request, reply) => {
      refuseCrossSite(request);
      const token = typeof request.body?.token === 'string' ? request.body.token : '';
      if (!token || !sameSecret(token, deps.adminToken))
        throw new AppError('UNAUTHENTICATED', 'that is not the admin token');
      const session = await openOperatorSession(deps.sessions);
      const maxAge = Math.floor((session.expiresAt.getTime() - deps.clock.now().getTime()) / 1000);
      return reply
        .header('set-cookie', sessionCookie(request, session.id, maxAge))
        .send({ expiresAt: session.expiresAt.toISOString(), csrfToken: session.csrfToken });
    },
  );

  // Ends the session on the server (its cookie is refused from now on, wherever a copy of it is).
  app.post('/dashboard/api/logout', { schema: hidden }, async (request, reply) => {
    refuseCrossSite(request);
    const id = sessionIdOf(request);
    if (id && (await useOperatorSession(deps.sessions, id))) {
      requireCsrfToken(request, id);
      await closeOperatorSession(deps.sessions, id);
    }
    return reply.header('set-cookie', sessionCookie(request, '', 0)).send({ ok: true });
  });

  // The page asks on load: a page opened with a live session gets the token it sends with each change.
  app.get('/dashboard/api/me', { schema: hidden, onRequest }, async (request) => ({
    role: 'operator',
    csrfToken: sessionCsrfToken(deps.sessions, sessionIdOf(request)!),
  }));

  /** The operator's live feed: every task's summary, on one channel only operators get a token for. */
  app.get('/dashboard/api/realtime-token', { schema: hidden, onRequest }, async (request) => {
    const token = await new SignJWT({ sub: 'operator', channels: [channels.operator] })
      .setProtectedHeader({ alg: 'HS256' })
      .setIssuedAt(nowSeconds())
      .setExpirationTime(nowSeconds() + 900)
      .sign(deps.realtimeKey);
    return {
      token,
      url: realtimeUrlOf(request, deps.wsUrl),
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
      const page = await deps.reads.tasks({ status, applicationId, workflow, limit });
      return {
        items: page.items.map((t) => ({
          ...t,
          failure: operatorError(t.failure as StructuredError | null),
          version: String(t.version),
          createdAt: t.createdAt.toISOString(),
          updatedAt: t.updatedAt.toISOString(),
          startedAt: t.startedAt?.toISOString() ?? null,
          finishedAt: t.finishedAt?.toISOString() ?? null,
        })),
        counts: Object.fromEntries(
          statuses.map((s) => [s, page.counts.find((c) => c.lifecycleStatus === s)?.n ?? 0]),
        ),
        applications: page.applications,
        workflows: page.workflows,
      };
    },
  );

  app.get<{ Params: { id: string } }>(
    '/dashboard/api/tasks/:id',
    { schema: hidden, onRequest },
    async (request) => {
      const id = request.params.id;
      if (!/^[0-9a-f-]{36}$/i.test(id)) throw new AppError('TASK_NOT_FOUND', `task ${id} does not exist`);
      const state = await deps.tasks.task(id);
      const tombstone = state ? null : await deps.archived.find(id);
      if (tombstone) throw archivedTaskError(tombstone);
      if (!state) throw new AppError('TASK_NOT_FOUND', `task ${id} does not exist`);
      const view = toTaskView(state);
      const [reasons, attempts, timeline, callbacks] = await Promise.all([
        deps.unschedulableReasons(id),
        deps.reads.attempts(id),
        timelineOf(deps.runs, id),
        callbackLogOf(deps.callbacks, id),
      ]);
      const stepError = (id: string) => state.steps.find((s) => s.id === id)?.error;
      return {
        ...view,
        task: {
          ...view.task,
          failure: view.task.failure
            ? { ...view.task.failure, detail: state.task.failure?.detail ?? null }
            : null,
        },
        execution: {
          ...view.execution,
          steps: view.execution.steps.map((step) => ({
            ...step,
            error: operatorError(stepError(step.id)),
            ...(step.status === 'READY' || step.status === 'QUEUED'
              ? { unschedulableReasons: reasons.get(step.id) ?? [] }
              : {}),
          })),
        },
        // The DAG as frozen into this execution.
        dag: state.execution.snapshot.steps.map((s) => ({
          key: s.key,
          dependsOn: s.dependsOn ?? [],
          capability: s.capability || null,
          kind: s.kind ?? 'capability',
        })),
        attempts: attempts.map((a) => ({
          ...a,
          createdAt: a.createdAt.toISOString(),
          startedAt: a.startedAt?.toISOString() ?? null,
          finishedAt: a.finishedAt?.toISOString() ?? null,
          revokedAt: a.revokedAt?.toISOString() ?? null,
        })),
        timeline,
        callbacks,
      };
    },
  );

  app.post<{
    Params: { id: string; key: string; action: string };
    Body: { reason?: unknown; idempotencyKey?: unknown };
  }>('/dashboard/api/tasks/:id/steps/:key/:action', { schema: hidden, onRequest }, async (request, reply) => {
    const { id, key, action } = request.params;
    const reason = typeof request.body?.reason === 'string' ? request.body.reason.trim() : '';
    const idempotencyKey = request.body?.idempotencyKey;
    if (!/^[0-9a-f-]{36}$/i.test(id)) throw new AppError('TASK_NOT_FOUND', `task ${id} does not exist`);
    if (action !== 'approve' && action !== 'reject')
      throw new AppError('ROUTE_NOT_FOUND', `no such action ${action}; approve or reject`);
    if (!reason || reason.length > 2000 || typeof idempotencyKey !== 'string' || idempotencyKey.length > 255)
      throw new AppError('VALIDATION_FAILED', 'send a reason (up to 2000 characters) and an idempotencyKey');
    const { view } = await decideApproval(
      deps.approvals,
      { decider: { kind: 'operator', reason }, reach: null },
      { taskId: id, stepKey: key, decision: action === 'approve' ? 'APPROVE' : 'REJECT', idempotencyKey },
    );
    return reply.code(200).send(view);
  });

  app.post<{
    Params: { id: string; name: string };
    Body: { reason?: unknown; idempotencyKey?: unknown; payload?: unknown };
  }>('/dashboard/api/tasks/:id/signals/:name', { schema: hidden, onRequest }, async (request, reply) => {
    const { id, name } = request.params;
    const reason = typeof request.body?.reason === 'string' ? request.body.reason.trim() : '';
    const idempotencyKey = request.body?.idempotencyKey;
    if (!/^[0-9a-f-]{36}$/i.test(id)) throw new AppError('TASK_NOT_FOUND', `task ${id} does not exist`);
    if (!reason || reason.length > 2000 || typeof idempotencyKey !== 'string' || idempotencyKey.length > 255)
      throw new AppError('VALIDATION_FAILED', 'send a reason (up to 2000 characters) and an idempotencyKey');
    const { body } = await sendSignal(
      deps.approvals,
      { kind: 'operator', reason },
      { taskId: id, name, payload: request.body.payload ?? null, idempotencyKey },
    );
    return reply.code(200).send(body);
  });

  registerDashboardOperatorRoutes(app, { onRequest, actions: deps.operatorActions });

  app.get('/dashboard/api/workers', { schema: hidden, onRequest }, async () => {
    const [workers, queued] = await Promise.all([listWorkerViews(deps.workers), deps.reads.queuedSteps()]);
    return {
      workers,
      queued: queued.map((q) => ({
        taskId: q.taskId,
        taskName: q.taskName,
        stepKey: q.stepKey,
        capability: `${q.capability}@${q.capabilityVersion}`,
        reasons: q.reasons,
        waitingSince: q.createdAt.toISOString(),
      })),
    };
  });

  app.get('/dashboard/api/health', { schema: hidden, onRequest }, async () => {
    const now = deps.clock.now();
    const line = (rows: PipelineRows) => pipelineLine(rows, now);
    const [outbox, realtime, callbacks, { staleSteps, queued }, temporalBridge] = await Promise.all([
      line(deps.pipeline.outbox),
      line(deps.pipeline.realtime),
      line(deps.pipeline.callbacks),
      deps.reads.stepHealth(),
      deps.temporalBridge?.backlog(now) ?? null,
    ]);
    return {
      outbox,
      realtime,
      callbacks,
      temporalBridge,
      staleSteps,
      queuedSteps: {
        count: queued.count,
        oldestAgeMs: queued.oldest ? Math.max(0, now.getTime() - queued.oldest.getTime()) : null,
      },
    };
  });

  registerDashboardChartRoutes(app, { charts: deps.charts, clock: deps.clock }, onRequest);

  app.get('/dashboard/api/workflow-definitions', { schema: hidden, onRequest }, async () => {
    const definitions = await deps.reads.workflowDefinitions();
    return {
      items: definitions.map((d) => ({
        ...d,
        steps: d.steps.map((s) => ({
          key: s.key,
          capability: s.capability ?? null,
          dependsOn: s.dependsOn ?? [],
        })),
        publishedAt: d.publishedAt.toISOString(),
      })),
    };
  });

  app.get('/dashboard/api/schedules', { schema: hidden, onRequest }, async () => ({
    items: await listAllSchedules(deps.schedules),
  }));

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

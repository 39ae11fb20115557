/**
 * The operator dashboard's API (`/dashboard/api`) and its built pages (`/dashboard/`), behind a signed-in
 * operator's session (dashboardSessionRoutes.ts). An operator sees the tenants their roles reach: tasks,
 * definitions, schedules, charts and the audit of those tenants; workers and the pipeline's health are
 * the platform's, for platform-wide roles. Acting needs the operator role where the action lands.
 */
import fastifyStatic from '@fastify/static';
import { isUuid, type StructuredError } from '@tdp/protocol';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { TaskState } from '../../../core/facts/records.ts';
import { publicError, toTaskView } from '../../../core/facts/views.ts';
import { allows } from '../../../core/identity/operatorAccess.ts';
import type { OperatorDeps } from '../../../core/identity/operators.ts';
import type { OperatorTokenDeps } from '../../../core/identity/operatorTokens.ts';
import type { ChartReads } from '../../../core/operations/charts.ts';
import { pipelineLine } from '../../../core/operations/charts.ts';
import type {
  CallbackDeliveries,
  DashboardReads,
  EngineBridgeReads,
  OperatorAudit,
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
import { registerAuditRoutes } from './auditRoutes.ts';
import { registerDashboardChartRoutes } from './dashboardChartRoutes.ts';
import { type DashboardOperatorActions, registerDashboardOperatorRoutes } from './dashboardOperatorRoutes.ts';
import { type DashboardQueueDeps, registerDashboardQueueRoutes } from './dashboardQueueRoutes.ts';
import { readDeprecatedStatusSpellings } from './deprecatedSpellings.ts';
import { registerOperatorAccountRoutes } from './operatorAccountRoutes.ts';
import {
  actorOfRequest,
  type OperatorGate,
  operatorOf,
  reachOf,
  requireTaskRole,
  requireTenantRole,
} from './operatorAuth.ts';
import { callbackLogOf, timelineOf } from './runRoutes.ts';
import { originOf, securityHeaders, sendSecurityHeaders } from './securityHeaders.ts';
import { itemsWait } from './tasksRoutes.ts';
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
  /** The dashboard API's gate (a signed-in operator's session, with a role enough for the route). */
  gate: OperatorGate;
  /** The operator audit, for the audit page. */
  audit: OperatorAudit;
  /** Operator accounts and tokens, for the operators page. */
  accounts: OperatorDeps;
  tokens: OperatorTokenDeps;
  clock: Clock;
  /** Which tenant a task is of (the actions' scope check). */
  taskTenant: (taskId: string) => Promise<string | null>;
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
  /** The queue page: fair share's counts, weights and keys, and the operator's changes to them. */
  queue: Omit<DashboardQueueDeps, 'clock'>;
  /** Built pages (packages/dashboard/dist); null when they are not built. */
  pagesDirectory: string | null;
  wsUrl?: string | null;
}

const statuses = ['PENDING', 'RUNNING', 'SUCCEEDED', 'FAILED', 'CANCELLED', 'TIMED_OUT'] as const;

/**
 * A failure as operators see it: the message for people (checked as everywhere) and, beside it, the
 * technical detail kept with it — which the public task view, callbacks and realtime never carry.
 */
function operatorError(error: StructuredError | null | undefined) {
  const shown = publicError(error ?? null);
  return shown ? { ...shown, detail: error?.detail ?? null } : null;
}

export function registerDashboardRoutes(app: FastifyInstance, deps: DashboardDeps): void {
  const { gate } = deps;
  const viewers = gate('viewer', 'tenants');
  const hidden = { hide: true };
  const taskMissing = (id: string) => () => new AppError('TASK_NOT_FOUND', `task ${id} does not exist`);

  /**
   * An operator's decision or signal on a task: its reason and idempotency key checked, and the operator
   * role for the task's tenant (another tenant's task does not exist for them).
   */
  const operatorActOnTask = async (
    request: FastifyRequest<{ Body: { reason?: unknown; idempotencyKey?: unknown } }>,
    taskId: string,
  ) => {
    const reason = typeof request.body?.reason === 'string' ? request.body.reason.trim() : '';
    const idempotencyKey = request.body?.idempotencyKey;
    if (!isUuid(taskId)) throw taskMissing(taskId)();
    if (!reason || reason.length > 2000 || typeof idempotencyKey !== 'string' || idempotencyKey.length > 255)
      throw new AppError('VALIDATION_FAILED', 'send a reason (up to 2000 characters) and an idempotencyKey');
    await requireTaskRole(request, 'operator', taskId, deps.taskTenant);
    return { reason, idempotencyKey };
  };

  // The live feed's WebSocket may be on another origin (Centrifugo): the pages' policy lets them reach it.
  const realtimeOrigin = deps.wsUrl ? originOf(deps.wsUrl) : null;
  if (realtimeOrigin) sendSecurityHeaders(app, securityHeaders([realtimeOrigin]));

  // Newest tasks first (ids are time-ordered UUIDv7, so this walks the primary key); the page moves a
  // task that changes to the top live.
  app.get<{ Querystring: { status?: string; applicationId?: string; workflow?: string; limit?: string } }>(
    '/dashboard/api/tasks',
    { schema: hidden, onRequest: viewers, preValidation: readDeprecatedStatusSpellings },
    async (request) => {
      const { status, applicationId, workflow } = request.query;
      if (status && !(statuses as readonly string[]).includes(status))
        throw new AppError('VALIDATION_FAILED', `status must be one of ${statuses.join(', ')}`);
      if (applicationId && !/^[0-9a-f-]{36}$/i.test(applicationId))
        throw new AppError('VALIDATION_FAILED', 'applicationId must be a UUID');
      const limit = Math.min(Math.max(Number(request.query.limit ?? 100) || 100, 1), 500);
      const page = await deps.reads.tasks({
        status,
        applicationId,
        workflow,
        tenants: reachOf(request),
        limit,
      });
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
    { schema: hidden, onRequest: viewers },
    async (request) => {
      const id = request.params.id;
      if (!isUuid(id)) throw taskMissing(id)();
      const state = await deps.tasks.task(id);
      const tombstone = state ? null : await deps.archived.find(id);
      // An archived task's tombstone names no tenant the check could use: platform-wide readers only.
      if (tombstone && allows(operatorOf(request), 'viewer', 'platform')) throw archivedTaskError(tombstone);
      if (!state) throw taskMissing(id)();
      requireTenantRole(request, 'viewer', state.task.tenantId, taskMissing(id));
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
            ...(step.status === 'READY' || step.status === 'QUEUED' || itemsWait(step, reasons)
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
  }>(
    '/dashboard/api/tasks/:id/steps/:key/:action',
    { schema: hidden, onRequest: gate('operator', 'tenants') },
    async (request, reply) => {
      const { id, key, action } = request.params;
      if (action !== 'approve' && action !== 'reject')
        throw new AppError('ROUTE_NOT_FOUND', `no such action ${action}; approve or reject`);
      const { reason, idempotencyKey } = await operatorActOnTask(request, id);
      const { view } = await decideApproval(
        deps.approvals,
        { decider: { kind: 'operator', reason, actor: actorOfRequest(request) }, reach: null },
        { taskId: id, stepKey: key, decision: action === 'approve' ? 'APPROVE' : 'REJECT', idempotencyKey },
      );
      return reply.code(200).send(view);
    },
  );

  app.post<{
    Params: { id: string; name: string };
    Body: { reason?: unknown; idempotencyKey?: unknown; payload?: unknown };
  }>(
    '/dashboard/api/tasks/:id/signals/:name',
    { schema: hidden, onRequest: gate('operator', 'tenants') },
    async (request, reply) => {
      const { id, name } = request.params;
      const { reason, idempotencyKey } = await operatorActOnTask(request, id);
      const { body } = await sendSignal(
        deps.approvals,
        { kind: 'operator', reason, actor: actorOfRequest(request) },
        { taskId: id, name, payload: request.body.payload ?? null, idempotencyKey },
      );
      return reply.code(200).send(body);
    },
  );

  registerDashboardOperatorRoutes(app, {
    onRequest: gate('operator', 'platform'),
    actions: deps.operatorActions,
  });
  registerOperatorAccountRoutes(app, {
    prefix: '/dashboard/api',
    gate,
    accounts: deps.accounts,
    tokens: deps.tokens,
    hidden: true,
  });
  registerAuditRoutes(app, { path: '/dashboard/api/audit', gate, audit: deps.audit, hidden: true });

  // Workers and the pipeline serve every tenant: they are the platform's to see.
  app.get('/dashboard/api/workers', { schema: hidden, onRequest: gate('viewer', 'platform') }, async () => {
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

  app.get('/dashboard/api/health', { schema: hidden, onRequest: gate('viewer', 'platform') }, async () => {
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

  registerDashboardChartRoutes(app, { charts: deps.charts, clock: deps.clock }, viewers);
  registerDashboardQueueRoutes(app, gate, { ...deps.queue, clock: deps.clock });

  app.get('/dashboard/api/workflow-definitions', { schema: hidden, onRequest: viewers }, async (request) => {
    const definitions = await deps.reads.workflowDefinitions(reachOf(request));
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

  app.get('/dashboard/api/schedules', { schema: hidden, onRequest: viewers }, async (request) => ({
    items: await listAllSchedules(deps.schedules, reachOf(request)),
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

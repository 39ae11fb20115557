/**
 * The operator's actions on tasks (admin token, with a reason; audited): bulk cancel and bulk retry by
 * filter, as a job with progress, and the administrator's correction of a task's or step's status.
 */
import { LifecycleStatus, TaskWithExecution } from '@tdp/protocol';
import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import { type BulkJobDeps, getBulkJob, startBulkJob } from '../../../core/operations/bulkJobs.ts';
import type { BulkAction, BulkJobRecord, BulkTaskFilter } from '../../../core/operations/ports.ts';
import { AppError } from '../../../core/shared/errors.ts';
import type { CorrectionRequest } from '../../../core/tasks/correction.ts';
import { type CorrectDeps, correctTask } from '../../../core/tasks/correctTask.ts';
import { readDeprecatedStatusSpellings } from './deprecatedSpellings.ts';
import {
  actorOfRequest,
  type OperatorGate,
  reachOf,
  refused,
  requireTaskRole,
  seesTenant,
} from './operatorAuth.ts';
import { requireIdempotencyKey } from './problems.ts';
import { IdempotencyKeyHeader, problemResponses, Uuid } from './schemas.ts';

const Timestamp = Type.String({ format: 'date-time' });
const Reason = Type.String({ minLength: 1, maxLength: 2000 });

const Filter = Type.Object(
  {
    status: Type.Optional(LifecycleStatus),
    applicationId: Type.Optional(Uuid),
    workflowName: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
    createdFrom: Type.Optional(Timestamp),
    createdTo: Type.Optional(Timestamp),
  },
  {
    additionalProperties: false,
    minProperties: 1,
    description: 'Every field given must match (at least one). Created times: from inclusive, to exclusive.',
  },
);
const BulkRequest = Type.Object({ filter: Filter, reason: Reason }, { additionalProperties: false });

const JobView = Type.Object({
  id: Type.String(),
  action: Type.Union([Type.Literal('CANCEL'), Type.Literal('RETRY')]),
  status: Type.Union([Type.Literal('RUNNING'), Type.Literal('SUCCEEDED'), Type.Literal('FAILED')]),
  filter: Type.Record(Type.String(), Type.String()),
  reason: Type.String(),
  actor: Type.String(),
  matched: Type.Integer({ description: 'Tasks the filter matched when the job was created' }),
  done: Type.Integer(),
  failed: Type.Integer(),
  skipped: Type.Integer({ description: 'Tasks with nothing to do (e.g. already ended, or still running)' }),
  cursor: Type.Integer({ description: 'How many of the matched tasks were handled' }),
  createdAt: Timestamp,
  updatedAt: Timestamp,
  finishedAt: Type.Union([Timestamp, Type.Null()]),
});

const jobView = (job: BulkJobRecord) => ({
  id: job.id,
  action: job.action,
  status: job.status,
  filter: job.filter as Record<string, string>,
  reason: job.reason,
  actor: job.actor,
  matched: job.matched,
  done: job.done,
  failed: job.failed,
  skipped: job.skipped,
  cursor: job.cursor,
  createdAt: job.createdAt.toISOString(),
  updatedAt: job.updatedAt.toISOString(),
  finishedAt: job.finishedAt?.toISOString() ?? null,
});

export function registerOperatorTaskRoutes(
  app: FastifyInstance,
  deps: {
    gate: OperatorGate;
    taskTenant: (taskId: string) => Promise<string | null>;
    jobs: BulkJobDeps;
    correct: CorrectDeps;
  },
): void {
  const onRequest = deps.gate('operator', 'tenants');
  const security = [{ adminToken: [] }];
  const tags = ['admin'];

  const bulk = (path: string, action: BulkAction, summary: string, description: string) =>
    app.post<{
      Body: { filter: BulkTaskFilter; reason: string };
      Headers: { 'idempotency-key'?: string };
    }>(
      path,
      {
        onRequest,
        preValidation: [readDeprecatedStatusSpellings, requireIdempotencyKey],
        schema: {
          tags,
          security,
          summary,
          description: `${description} The tasks the filter matches now (at most the \`bulkJobTaskLimit\` setting, 10,000; more is 422 BULK_FILTER_TOO_BROAD) are handled by a job in the background, oldest first; \`GET /admin/v1/jobs/{id}\` reads its progress. Requires \`Idempotency-Key\`: the same key and request answer the same job; the same key with another request is 409 IDEMPOTENCY_KEY_REUSED. Audited.`,
          headers: IdempotencyKeyHeader,
          body: BulkRequest,
          response: { 202: Type.Object({ jobId: Type.String() }), ...problemResponses },
        },
      },
      async (request, reply) => {
        const { job, replayed } = await startBulkJob(
          deps.jobs,
          action,
          request.headers['idempotency-key']!,
          request.body,
          actorOfRequest(request),
          // A tenant-scoped operator's job matches their tenants' tasks only.
          reachOf(request, 'operator'),
        );
        if (replayed) reply.header('idempotent-replayed', 'true');
        return reply.code(202).header('location', `/admin/v1/jobs/${job.id}`).send({ jobId: job.id });
      },
    );

  bulk(
    '/admin/v1/tasks::bulkCancel',
    'CANCEL',
    'Cancel every task a filter matches, as a job with progress (audited)',
    'Each task is cancelled as `POST /v1/tasks/{id}:cancel` cancels it, with the reason; a task that already ended or is cancelled is skipped.',
  );
  bulk(
    '/admin/v1/tasks::bulkRetry',
    'RETRY',
    'Run again every finished task a filter matches, as a job with progress (audited)',
    'Each task is retried as `POST /v1/tasks/{id}:retry` retries it (execution #n+1), with the reason; a task that has not ended is skipped.',
  );

  app.get<{ Params: { id: string } }>(
    '/admin/v1/jobs/:id',
    {
      onRequest: deps.gate('viewer', 'tenants'),
      schema: {
        tags,
        security,
        summary: "Read a bulk job's progress",
        params: Type.Object({ id: Uuid }),
        response: { 200: JobView, ...problemResponses },
      },
    },
    async (request) => {
      const job = await getBulkJob(deps.jobs, request.params.id);
      // A job that may touch a tenant the caller does not see is not theirs to read.
      const reach = reachOf(request);
      if (reach !== 'all' && (job.tenantIds === null || !job.tenantIds.every((t) => seesTenant(reach, t))))
        throw refused(request, new AppError('JOB_NOT_FOUND', `job ${request.params.id} does not exist`));
      return jobView(job);
    },
  );

  app.post<{ Params: { id: string }; Body: CorrectionRequest }>(
    '/admin/v1/tasks/:id(^[0-9a-fA-F-]{36})::correct',
    {
      onRequest,
      preValidation: readDeprecatedStatusSpellings,
      schema: {
        tags,
        security,
        summary: "Correct a task's or a step's status, with a reason (audited)",
        description:
          "Sets the task (or, with `stepKey`, its current step) to `lifecycleStatus` (and `businessStatus`), in one fact: a new task version and an immutable `ADMIN_CORRECTED` event with the old and new values, the reason and the operator, published on the task's channels and kept in its timeline and the operator audit. A `businessStatus` the task's status definition does not register is 422 UNKNOWN_BUSINESS_STATUS (a task bound to none takes any). A change the state machine forbids (a terminal status moved, a step sent back) is 409 CORRECTION_FORBIDDEN unless `force` is true. It changes the record only: it stops and starts no work.",
        params: Type.Object({ id: Uuid }),
        body: Type.Object(
          {
            stepKey: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })),
            lifecycleStatus: LifecycleStatus,
            businessStatus: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })),
            reason: Reason,
            force: Type.Optional(Type.Boolean()),
          },
          { additionalProperties: false },
        ),
        response: {
          200: Type.Object({
            task: TaskWithExecution,
            eventId: Type.String(),
            auditId: Type.String(),
            forced: Type.Boolean(),
          }),
          ...problemResponses,
        },
      },
    },
    async (request) => {
      await requireTaskRole(request, 'operator', request.params.id, deps.taskTenant);
      return correctTask(deps.correct, request.params.id, request.body, actorOfRequest(request));
    },
  );
}

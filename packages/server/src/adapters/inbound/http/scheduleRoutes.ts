import { CreateScheduleRequest, Schedule, SchedulePage } from '@tdp/protocol';
import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import type { ApiKeyAuthenticator } from '../../../core/identity/authenticate.ts';
import {
  createSchedule,
  getSchedule,
  listSchedules,
  pauseSchedule,
  resumeSchedule,
  type ScheduleDeps,
} from '../../../core/schedules/schedules.ts';
import { principalOf, requireApplication } from './auth.ts';
import { requireIdempotencyKey } from './problems.ts';
import { emptyBodyAsObject, IdempotencyKeyHeader, problemResponses, Uuid } from './schemas.ts';

export interface ScheduleRouteDeps {
  authenticator: ApiKeyAuthenticator;
  schedules: ScheduleDeps;
}

export function registerScheduleRoutes(app: FastifyInstance, deps: ScheduleRouteDeps): void {
  const onRequest = requireApplication(deps.authenticator);
  const security = [{ apiKey: [] }];
  const ScheduleParams = Type.Object({ id: Uuid });

  app.post<{ Body: CreateScheduleRequest; Headers: { 'idempotency-key'?: string } }>(
    '/v1/schedules',
    {
      onRequest,
      preValidation: requireIdempotencyKey,
      schema: {
        tags: ['schedules'],
        summary: 'Create a schedule',
        description:
          'Starts a task of a published workflow at every fire time of a cron expression in a time zone ' +
          '(docs/schedules.md). A cron expression that does not parse is 400 CRON_EXPRESSION_INVALID. Requires ' +
          '`Idempotency-Key`: the same key and request return the original schedule (200).',
        security,
        headers: IdempotencyKeyHeader,
        body: CreateScheduleRequest,
        response: { 200: Schedule, 201: Schedule, ...problemResponses },
      },
    },
    async (request, reply) => {
      const key = request.headers['idempotency-key']!;
      const result = await createSchedule(deps.schedules, principalOf(request), key, request.body);
      if (result.replayed) reply.header('idempotent-replayed', 'true');
      return reply
        .code(result.replayed ? 200 : 201)
        .header('location', `/v1/schedules/${result.body.id}`)
        .send(result.body);
    },
  );

  app.get(
    '/v1/schedules',
    {
      onRequest,
      schema: {
        tags: ['schedules'],
        summary: "List the application's schedules with their next fire times, newest first",
        security,
        response: { 200: SchedulePage, ...problemResponses },
      },
    },
    async (request) => listSchedules(deps.schedules, principalOf(request)),
  );

  app.get<{ Params: { id: string } }>(
    '/v1/schedules/:id',
    {
      onRequest,
      schema: {
        tags: ['schedules'],
        summary: 'Read a schedule',
        security,
        params: ScheduleParams,
        response: { 200: Schedule, ...problemResponses },
      },
    },
    async (request) => getSchedule(deps.schedules, principalOf(request), request.params.id),
  );

  for (const [action, run, summary] of [
    ['pause', pauseSchedule, 'Pause a schedule (idempotent): no fire until it is resumed'],
    ['resume', resumeSchedule, 'Resume a schedule (idempotent): fires from now on; none is caught up'],
  ] as const) {
    app.post<{ Params: { id: string } }>(
      `/v1/schedules/:id(^[0-9a-fA-F-]{36})::${action}`,
      {
        onRequest,
        preValidation: emptyBodyAsObject,
        schema: {
          tags: ['schedules'],
          summary,
          security,
          params: ScheduleParams,
          response: { 200: Schedule, ...problemResponses },
        },
      },
      async (request) => run(deps.schedules, principalOf(request), request.params.id),
    );
  }
}

/** What workers and coordinators report: task events (one or a batch) and heartbeats. */
import {
  BatchItemResult,
  CompactTaskEvent,
  EventResult,
  FullTaskEvent,
  HeartbeatAnswer,
  HeartbeatItem,
  HeartbeatResult,
  TaskEventRequest,
} from '@tdp/protocol';
import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import { reportTaskEvent } from '../../../core/status/events.ts';
import { recordHeartbeats } from '../../../core/status/heartbeats.ts';
import { credentialFor, decodeReportedEvent, reportEventBodies } from '../reportCommands.ts';
import { problemResponses } from './schemas.ts';
import { reportSecurity, type StatusCallers, type StatusRouteDeps, tags } from './statusRouteContext.ts';

export function registerEventReportRoutes(
  app: FastifyInstance,
  deps: StatusRouteDeps,
  { caller, chargeExecutions }: StatusCallers,
): void {
  app.post<{ Body: TaskEventRequest }>(
    '/v1/task-events',
    {
      schema: {
        tags,
        security: reportSecurity,
        summary:
          'Report one event (execution token; or executionHandle / coordinator events with the API key)',
        description:
          'Full self-describing form with `Authorization: Bearer <executionToken>`, compact form with `executionHandle` and ' +
          'the API key, or TASK_COMPLETED / TASK_FAILED with the API key. A retry with the same eventId and content ' +
          'returns the first answer (`duplicate: true`); refusals are problem+json with the codes of docs/errors.md.',
        body: TaskEventRequest,
        response: { 200: EventResult, ...problemResponses },
      },
    },
    async (request) => {
      const who = await caller(request);
      const body = request.body as unknown as Record<string, unknown>;
      await chargeExecutions([body.executionToken as string | undefined], who);
      return reportTaskEvent(deps.status, {
        credential: credentialFor(who, body),
        event: decodeReportedEvent(body),
      });
    },
  );

  app.post<{ Body: { events: Record<string, unknown>[] } }>(
    '/v1/task-events::batch',
    {
      schema: {
        tags,
        security: reportSecurity,
        summary: 'Report up to 500 events; each item gets its own result',
        body: Type.Object(
          {
            events: Type.Array(
              Type.Union([
                CompactTaskEvent,
                Type.Object(
                  {
                    ...FullTaskEvent.properties,
                    executionToken: Type.Optional(Type.String({ minLength: 10, maxLength: 4096 })),
                  },
                  { additionalProperties: false },
                ),
              ]),
              { minItems: 1, maxItems: 500 },
            ),
          },
          { additionalProperties: false },
        ),
        response: { 200: Type.Object({ results: Type.Array(BatchItemResult) }), ...problemResponses },
      },
    },
    async (request) => {
      const who = await caller(request);
      await chargeExecutions(
        request.body.events.map((event) => event.executionToken as string | undefined),
        who,
      );
      const results = await reportEventBodies(deps.status, who, request.body.events);
      return { results };
    },
  );

  app.post<{ Body: { heartbeats: HeartbeatItem[]; answer?: 'all' | 'exceptions' } }>(
    '/v1/task-heartbeats::batch',
    {
      schema: {
        tags,
        security: reportSecurity,
        summary: 'Heartbeats of running executions (light path: no version, no message)',
        body: Type.Object(
          {
            heartbeats: Type.Array(HeartbeatItem, { minItems: 1, maxItems: 2000 }),
            answer: Type.Optional(HeartbeatAnswer),
          },
          { additionalProperties: false },
        ),
        response: {
          200: Type.Object({
            results: Type.Array(HeartbeatResult),
            acceptedCount: Type.Integer(),
            receivedAt: Type.String(),
          }),
          ...problemResponses,
        },
      },
    },
    async (request) => {
      const who = await caller(request);
      await chargeExecutions(
        request.body.heartbeats.map((beat) => beat.executionToken),
        who,
      );
      const principal = who?.kind === 'application' ? who.principal : null;
      const results = await recordHeartbeats(deps.status, principal, request.body.heartbeats);
      let acceptedCount = 0;
      for (const result of results) if (result.outcome === 'ACCEPTED') acceptedCount += 1;
      return {
        // A worker with thousands of executions only needs to hear about the beats that were not
        // plainly accepted; the answer then carries those alone (each with its index).
        results:
          request.body.answer === 'exceptions' ? results.filter((r) => r.outcome !== 'ACCEPTED') : results,
        acceptedCount,
        receivedAt: deps.status.clock.now().toISOString(),
      };
    },
  );
}

/** What workers and coordinators report: task events (one or a batch) and heartbeats. */
import {
  BatchItemResult,
  CompactTaskEvent,
  EventResult,
  FullTaskEvent,
  HeartbeatItem,
  HeartbeatResult,
  TaskEventRequest,
} from '@tdp/protocol';
import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import { AppError } from '../../../core/shared/errors.ts';
import { reportTaskEvent, reportTaskEvents } from '../../../core/status/events.ts';
import { recordHeartbeats } from '../../../core/status/heartbeats.ts';
import type { EventCredential, ReportedEvent } from '../../../core/status/reportedEvents.ts';
import { problem } from './problems.ts';
import { problemResponses } from './schemas.ts';
import {
  type Caller,
  reportSecurity,
  type StatusCallers,
  type StatusRouteDeps,
  tags,
} from './statusRouteContext.ts';

export function registerEventReportRoutes(
  app: FastifyInstance,
  deps: StatusRouteDeps,
  { caller, chargeExecutions }: StatusCallers,
): void {
  function credentialFor(
    who: Caller | null,
    body: ReportedEvent & { executionHandle?: string; executionToken?: string },
  ): EventCredential {
    if (body.executionToken) return { kind: 'token', token: body.executionToken };
    if (body.executionHandle) {
      if (who?.kind !== 'application')
        throw new AppError(
          'UNAUTHENTICATED',
          'an executionHandle is used with your API key in Authorization',
        );
      return { kind: 'handle', handle: body.executionHandle, principal: who.principal };
    }
    if (who?.kind === 'token') return { kind: 'token', token: who.token };
    if (who?.kind === 'application') return { kind: 'coordinator', principal: who.principal };
    throw new AppError(
      'EXECUTION_CREDENTIAL_INVALID',
      'send an execution token, or an executionHandle with your API key',
    );
  }

  const decode = (body: Record<string, unknown>): ReportedEvent => {
    const { executionHandle: _h, executionToken: _t, ...event } = body;
    return event as unknown as ReportedEvent;
  };

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
        credential: credentialFor(who, body as never),
        event: decode(body),
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
      const prepared: {
        index: number;
        item?: { credential: EventCredential; event: ReportedEvent };
        error?: AppError;
      }[] = request.body.events.map((body, index) => {
        try {
          return { index, item: { credential: credentialFor(who, body as never), event: decode(body) } };
        } catch (error) {
          if (error instanceof AppError) return { index, error };
          throw error;
        }
      });
      const valid = prepared.filter((p) => p.item);
      const outcomes =
        valid.length > 0
          ? await reportTaskEvents(
              deps.status,
              valid.map((p) => p.item!),
            )
          : [];
      const results = prepared.map(
        (p) =>
          ({
            index: p.index,
            eventId: (request.body.events[p.index]!.eventId as string) ?? null,
            ok: false,
            error: p.error ? problemOf(p.error) : undefined,
          }) as Record<string, unknown>,
      );
      valid.forEach((p, i) => {
        const outcome = outcomes[i]!;
        results[p.index] = outcome.ok
          ? { index: p.index, eventId: outcome.result.eventId, ok: true, result: outcome.result }
          : {
              index: p.index,
              eventId: request.body.events[p.index]!.eventId ?? null,
              ok: false,
              error: problemOf(outcome.error),
            };
      });
      return { results };
    },
  );

  app.post<{ Body: { heartbeats: HeartbeatItem[] } }>(
    '/v1/task-heartbeats::batch',
    {
      schema: {
        tags,
        security: reportSecurity,
        summary: 'Heartbeats of running executions (light path: no version, no message)',
        body: Type.Object(
          { heartbeats: Type.Array(HeartbeatItem, { minItems: 1, maxItems: 2000 }) },
          { additionalProperties: false },
        ),
        response: {
          200: Type.Object({ results: Type.Array(HeartbeatResult), receivedAt: Type.String() }),
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
      return { results, receivedAt: deps.status.clock.now().toISOString() };
    },
  );
}

function problemOf(error: AppError) {
  const p = problem(error.code, error.message);
  return { code: p.code, status: p.status, detail: p.detail };
}

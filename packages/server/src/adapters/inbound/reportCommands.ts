/**
 * What the reporting adapters share (REST in http/eventReportRoutes.ts and workerRoutes.ts, gRPC in
 * grpc/): a decoded body becomes the same command for the same application service, and its outcome the
 * same answer. Adapters only authenticate, decode and map these answers to their protocol.
 */
import { type BatchItemResult, errorCatalogue, type WorkerEvent } from '@tdp/protocol';
import { AppError } from '../../core/shared/errors.ts';
import type { StatusDeps } from '../../core/status/deps.ts';
import { reportTaskEvents } from '../../core/status/events.ts';
import type { EventCredential, ReportedEvent } from '../../core/status/reportedEvents.ts';
import { recordWorkerEvents } from '../../core/status/workerInbox.ts';
import type { WorkerOwner } from '../../core/workers/ports.ts';
import type { Caller } from './http/statusRouteContext.ts';

type EventBody = Record<string, unknown> & { executionHandle?: string; executionToken?: string };

/** The credential an event body is reported with: its own token or handle, else the caller's. */
export function credentialFor(who: Caller | null, body: EventBody): EventCredential {
  if (body.executionToken) return { kind: 'token', token: body.executionToken };
  if (body.executionHandle) {
    if (who?.kind !== 'application')
      throw new AppError('UNAUTHENTICATED', 'an executionHandle is used with your API key in Authorization');
    return { kind: 'handle', handle: body.executionHandle, principal: who.principal };
  }
  if (who?.kind === 'token') return { kind: 'token', token: who.token };
  if (who?.kind === 'application') return { kind: 'coordinator', principal: who.principal };
  throw new AppError(
    'EXECUTION_CREDENTIAL_INVALID',
    'send an execution token, or an executionHandle with your API key',
  );
}

/** The event of a body, without the credential fields. */
export function decodeReportedEvent(body: EventBody): ReportedEvent {
  const { executionHandle: _h, executionToken: _t, ...event } = body;
  return event as unknown as ReportedEvent;
}

/** A refusal as one item's error: its code, the status it would have on its own, the detail. */
export function itemProblem(error: AppError): { code: string; status: number; detail: string } {
  return { code: error.code, status: errorCatalogue[error.code].status, detail: error.message };
}

/**
 * Events (validated bodies) in one transaction, each with its own result: the answer of
 * `POST /v1/task-events:batch`. A body whose credential cannot be made is refused alone.
 */
export async function reportEventBodies(
  status: StatusDeps,
  who: Caller | null,
  bodies: EventBody[],
): Promise<BatchItemResult[]> {
  const prepared = bodies.map((body, index) => {
    try {
      return { index, item: { credential: credentialFor(who, body), event: decodeReportedEvent(body) } };
    } catch (error) {
      if (error instanceof AppError) return { index, error };
      throw error;
    }
  });
  const valid = prepared.filter((p) => p.item);
  const outcomes =
    valid.length > 0
      ? await reportTaskEvents(
          status,
          valid.map((p) => p.item!),
        )
      : [];
  const eventIdOf = (index: number) => (bodies[index]!.eventId as string | undefined) ?? null;
  const results: BatchItemResult[] = prepared.map((p) => ({
    index: p.index,
    eventId: eventIdOf(p.index),
    ok: false,
    ...(p.error ? { error: itemProblem(p.error) } : {}),
  }));
  valid.forEach((p, i) => {
    const outcome = outcomes[i]!;
    results[p.index] = outcome.ok
      ? { index: p.index, eventId: outcome.result.eventId, ok: true, result: outcome.result }
      : { index: p.index, eventId: eventIdOf(p.index), ok: false, error: itemProblem(outcome.error) };
  });
  return results;
}

/** A worker's events through the attempt inbox: the answer of `POST /v1/workers/{id}/events:batch`. */
export async function reportWorkerEvents(
  inbox: StatusDeps,
  worker: WorkerOwner,
  events: WorkerEvent[],
  commandAcks: string[],
) {
  const outcomes = await recordWorkerEvents(inbox, worker, events, commandAcks);
  return outcomes.map((o, index) => {
    const eventId = events[index]!.eventId;
    if (o.ok) return { index, eventId, ...o };
    // The inbox's own refusals carry their HTTP status; the status service's carry 0.
    const status = o.refusedBy === 'inbox' ? errorCatalogue[o.code].status : 0;
    return { index, eventId, ok: false as const, code: o.code, status, detail: o.detail };
  });
}

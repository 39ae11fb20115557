/** Log lines about tasks, with the fields that follow one change end to end (docs/observability.md). */
import type { WorkerEventOutcome } from '@tdp/protocol';
import type { FastifyBaseLogger } from 'fastify';

/** One line per reported event: accepted with its task's fields, or refused with its error code. */
export function logReportedEvents(
  log: FastifyBaseLogger,
  traceId: string | undefined,
  events: { eventType?: string; attemptId?: string; sourceSeq?: number }[],
  outcomes: WorkerEventOutcome[],
): void {
  for (const outcome of outcomes) {
    const event = events[outcome.index];
    const fields = {
      traceId,
      eventId: outcome.eventId,
      eventType: event?.eventType,
      attemptId: event?.attemptId,
      sourceSeq: event?.sourceSeq,
    };
    if (outcome.ok) {
      const { taskId, stepId, taskVersion, operationCode } = outcome.result;
      log.info({ ...fields, taskId, stepId, taskVersion, operationCode }, 'event reported');
    } else log.warn({ ...fields, errorCode: outcome.code }, 'event refused');
  }
}

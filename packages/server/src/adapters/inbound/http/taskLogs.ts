/** Log lines about tasks, with the fields that follow one change end to end (docs/observability.md). */
import type { WorkerEventOutcome } from '@tdp/protocol';
import type { FastifyBaseLogger } from 'fastify';
import { alreadyEnded } from '../../../core/facts/stateMachine.ts';

/**
 * Whether a refusal says the report came after its attempt, step or task had ended: normal when a worker
 * was still finishing as a cancel or a sibling's failure stopped it, so not worth a warning. An attempt
 * no longer current is STALE_EXECUTION; an ended step or task is INVALID_TRANSITION "already ended" (the
 * same code also refuses, say, a second STEP_STARTED, which stays a warning); an archived task ended long ago.
 */
export function refusedAsOver(outcome: { code: string; detail: string }): boolean {
  if (outcome.code === 'STALE_EXECUTION' || outcome.code === 'TASK_ARCHIVED') return true;
  return outcome.code === 'INVALID_TRANSITION' && outcome.detail.includes(alreadyEnded);
}

/**
 * One line per reported event: accepted with its task's fields, or refused with its error code — at
 * debug when the refusal only says its attempt is over, at warn otherwise.
 */
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
    } else if (refusedAsOver(outcome))
      log.debug({ ...fields, errorCode: outcome.code }, 'event refused: its attempt is over');
    else log.warn({ ...fields, errorCode: outcome.code }, 'event refused');
  }
}

import type { Logger } from 'pino';
import type { ClaimableRows } from '../../adapters/outbound/postgres/outboxQueue.ts';
import type { TimerRecord } from '../../core/facts/records.ts';
import { fireTimer, type TimerDeps } from '../../core/orchestration/timers.ts';
import type { Clock } from '../../core/shared/ports.ts';
import { type Paced, pace, WakeableLoop } from '../../host/loops/wakeableLoop.ts';

/** Fires due timers (timeouts, retry back-off, cancel grace, sleeps, child ends) through the fact path. */
export function createTimerLoop(
  deps: {
    status: TimerDeps;
    timers: ClaimableRows;
    logger: Logger;
    clock: Clock;
  } & Paced,
): WakeableLoop {
  const batch = deps.pacing.batchSize;
  return new WakeableLoop({
    name: 'timers',
    logger: deps.logger,
    now: () => deps.clock.now(),
    ...pace(deps),
    round: async () => {
      const due = await deps.timers.claim<{
        kind: TimerRecord['kind'];
        task_id: string;
        step_id: string | null;
        payload: Record<string, unknown>;
      }>(deps.clock.now(), batch);
      for (const timer of due) {
        try {
          await fireTimer(deps.status, {
            id: timer.id,
            kind: timer.kind,
            taskId: timer.task_id,
            stepId: timer.step_id,
            payload: timer.payload,
          });
          await deps.timers.markPublished(timer.claim_id, [timer.id], deps.clock.now());
        } catch (error) {
          await deps.timers.markFailed(
            timer.claim_id,
            timer.id,
            timer.attempts,
            (error as Error).message,
            deps.clock.now(),
          );
        }
      }
      return { full: due.length === batch };
    },
    nextDueAt: () => deps.timers.nextDueAt(),
  });
}

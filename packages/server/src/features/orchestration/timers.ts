import type { ClaimableRows } from '../../adapters/outbound/postgres/outboxQueue.ts';
import type { TimerRecord } from '../../core/facts/records.ts';
import { fireTimer, type TimerDeps } from '../../core/orchestration/timers.ts';
import type { Clock } from '../../core/shared/ports.ts';

/**
 * One round of the timers loop: claims up to `batch` due timers (timeouts, retry back-off, cancel grace,
 * sleeps, a child task's end) and fires each through the fact path; a timer that fails is retried later.
 * Returns how many it claimed.
 */
export async function fireDueTimers(
  deps: TimerDeps,
  timers: ClaimableRows,
  clock: Clock,
  batch: number,
): Promise<number> {
  const due = await timers.claim<{
    kind: TimerRecord['kind'];
    task_id: string;
    step_id: string | null;
    payload: Record<string, unknown>;
  }>(clock.now(), batch);
  for (const timer of due) {
    try {
      await fireTimer(deps, {
        id: timer.id,
        kind: timer.kind,
        taskId: timer.task_id,
        stepId: timer.step_id,
        payload: timer.payload,
      });
      await timers.markPublished(timer.claim_id, [timer.id], clock.now());
    } catch (error) {
      await timers.markFailed(
        timer.claim_id,
        timer.id,
        timer.attempts,
        (error as Error).message,
        clock.now(),
      );
    }
  }
  return due.length;
}

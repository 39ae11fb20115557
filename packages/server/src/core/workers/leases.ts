/**
 * Lost workers: a session whose heartbeats stopped past its TTL loses its leases. Each open attempt it
 * held fails as WORKER_LOST (an infrastructure failure: retried under every failure policy while
 * attempts remain) through the fact path, so the step runs again elsewhere; the lost worker's late
 * events then find a superseded attempt and are answered STALE_EXECUTION. A session already ended that
 * still holds open attempts (the reaper died between the two, or a placement raced the end) is lost too.
 */

import { inFactTransaction } from '../facts/session.ts';
import { failStepAttempt } from '../orchestration/consequences.ts';
import { isRunningMap, settleMapItems } from '../orchestration/kinds/map.ts';
import type { DispatchDeps } from './dispatch.ts';

const workerLost = {
  category: 'WORKER',
  code: 'WORKER_LOST',
  retryable: true,
  userMessage: 'The worker running this step stopped responding; retrying',
};

export async function reapLostWorkers(deps: DispatchDeps): Promise<number> {
  const now = deps.status.clock.now();
  const lost = await deps.workers.lostWorkers(new Date(now.getTime() - deps.heartbeatTtlMs));
  let reaped = 0;
  for (const workerId of lost) {
    await deps.workers.endWorker(workerId, now);
    deps.workersEnded?.();
    for (const { attemptId, taskId, item } of await deps.workers.openAttempts(workerId)) {
      await inFactTransaction(deps.status, async (session) => {
        const before = await session.lockTask(taskId);
        if (item) {
          // A map item's attempt: the item runs again (while attempts remain), the map goes on.
          const map = before?.steps.find((s) => s.id === item.stepId);
          if (!before || !isRunningMap(map)) return;
          const settled = await settleMapItems(
            deps.status,
            session,
            before,
            map,
            [{ index: item.index, attemptId, result: { kind: 'FAILED', error: workerLost, lost: true } }],
            'tdp:lease-reaper',
          );
          if (settled.outcomes[0] === 'APPLIED') reaped += 1;
          return;
        }
        const step = before?.steps.find((s) => s.attemptId === attemptId);
        if (!before || !step?.current || (step.status !== 'QUEUED' && step.status !== 'RUNNING')) return;
        await failStepAttempt(deps.status, session, before, step, {
          producer: 'tdp:lease-reaper',
          error: workerLost,
          infrastructure: true,
          workerId,
          milestone: 'WORKER_LOST',
        });
        reaped += 1;
      });
    }
  }
  return reaped;
}

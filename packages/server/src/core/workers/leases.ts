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
import type { OpenAttempt } from './ports.ts';

const workerLost = {
  category: 'WORKER',
  code: 'WORKER_LOST',
  retryable: true,
  userMessage: 'The worker running this step stopped responding; retrying',
};

const attemptNotHeld = {
  category: 'WORKER',
  code: 'ATTEMPT_NOT_ON_WORKER',
  retryable: true,
  userMessage: 'The worker running this step no longer had it; retrying',
};

type AttemptError = typeof workerLost;

export async function reapLostWorkers(deps: DispatchDeps): Promise<number> {
  const now = deps.status.clock.now();
  const lost = await deps.workers.lostWorkers(new Date(now.getTime() - deps.heartbeatTtlMs));
  let reaped = 0;
  for (const workerId of lost) {
    await deps.workers.endWorker(workerId, now);
    deps.workersEnded?.();
    for (const open of await deps.workers.openAttempts(workerId))
      if (await failOpenAttempt(deps, workerId, open, workerLost, 'WORKER_LOST')) reaped += 1;
  }
  return reaped;
}

/**
 * A live session's heartbeat listed the attempts the worker holds: an open attempt of the session that
 * is not among them, and was started longer ago than the heartbeat TTL (so a START still on its way is
 * not mistaken for one), is unknown to the worker. Its START never arrived, or the worker finished it and
 * the database lost the report (an asynchronous standby promoted, a restore): nothing will ever end it,
 * and it holds a slot of the worker. It fails, to be retried. How many.
 */
export async function releaseUnheldAttempts(
  deps: DispatchDeps,
  workerId: string,
  held: readonly string[],
): Promise<number> {
  const holding = new Set(held);
  const startedBefore = deps.status.clock.now().getTime() - deps.heartbeatTtlMs;
  let released = 0;
  for (const open of await deps.workers.openAttempts(workerId)) {
    if (holding.has(open.attemptId) || open.startedAt.getTime() > startedBefore) continue;
    if (await failOpenAttempt(deps, workerId, open, attemptNotHeld, 'ATTEMPT_NOT_ON_WORKER')) released += 1;
  }
  return released;
}

/** Fails one open attempt of `workerId` (a step's, or a map item's) as an infrastructure failure. */
async function failOpenAttempt(
  deps: DispatchDeps,
  workerId: string,
  { attemptId, taskId, item }: OpenAttempt,
  error: AttemptError,
  milestone: string,
): Promise<boolean> {
  let failed = false;
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
        [{ index: item.index, attemptId, result: { kind: 'FAILED', error, lost: true } }],
        'tdp:lease-reaper',
      );
      failed = settled.outcomes[0] === 'APPLIED';
      return;
    }
    const step = before?.steps.find((s) => s.attemptId === attemptId);
    if (!before || !step?.current || (step.status !== 'QUEUED' && step.status !== 'RUNNING')) return;
    await failStepAttempt(deps.status, session, before, step, {
      producer: 'tdp:lease-reaper',
      error,
      infrastructure: true,
      workerId,
      milestone,
    });
    failed = true;
  });
  return failed;
}

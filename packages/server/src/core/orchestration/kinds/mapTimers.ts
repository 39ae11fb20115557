/**
 * The map step's timers (kinds/map.ts): an item's retry back-off (MAP_ITEM_RETRY_DUE) and an item
 * attempt's startToCloseMs (MAP_ITEM_TIMEOUT). Fired through timers.ts, in the timer's fact transaction.
 */
import type { StepRecord, TaskState } from '../../facts/records.ts';
import type { FactSession } from '../../facts/session.ts';
import type { ConsequenceDeps } from '../consequences.ts';
import { isRunningMap, placementRequest, settleMapItems } from './map.ts';

/** MAP_ITEM_RETRY_DUE: an item's back-off has passed; it is pending again and the map asks for a slot. */
export async function mapItemRetryDue(
  deps: ConsequenceDeps,
  session: FactSession,
  before: TaskState,
  step: StepRecord | undefined,
  payload: Record<string, unknown>,
): Promise<void> {
  if (!isRunningMap(step)) return;
  const index = Number(payload.index);
  const [item] = await session.tx.mapItemsAt(step.id, [index]);
  if (item?.status !== 'WAITING_RETRY' || item.attempt !== Number(payload.itemAttempt)) return;
  await session.write({
    mapItems: [{ ...item, status: 'PENDING', attemptId: null, updatedAt: session.now }],
    reopenSchedulingRequests: [placementRequest(deps, before, step, session.now)],
  });
}

/**
 * MAP_ITEM_TIMEOUT: an item attempt still running after the map step's `startToCloseMs` fails as timed out
 * (retried under the step's policy); its worker is told to stop it.
 */
export async function mapItemTimedOut(
  deps: ConsequenceDeps,
  session: FactSession,
  before: TaskState,
  step: StepRecord | undefined,
  payload: Record<string, unknown>,
): Promise<void> {
  if (!isRunningMap(step)) return;
  const index = Number(payload.index);
  const attemptId = String(payload.attemptId);
  const [item] = await session.tx.mapItemsAt(step.id, [index]);
  if (item?.status !== 'RUNNING' || item.attemptId !== attemptId) return;
  const settled = await settleMapItems(
    deps,
    session,
    before,
    step,
    [
      {
        index,
        attemptId,
        result: {
          kind: 'FAILED',
          error: {
            category: 'TIMEOUT',
            code: 'START_TO_CLOSE_TIMEOUT',
            retryable: true,
            userMessage: `Item ${index} of step ${step.key} timed out: it did not finish within ${Number(payload.limitMs)} ms`,
          },
          lost: false,
        },
      },
    ],
    'tdp:timer',
    [item],
  );
  const workerId = (await session.findAttempt(attemptId))?.workerId;
  if (settled.outcomes[0] === 'APPLIED' && workerId)
    await session.write({
      workerCommands: [
        {
          id: deps.ids.newId(),
          workerId,
          type: 'CANCEL_ATTEMPT',
          payload: { attemptId, reason: 'START_TO_CLOSE_TIMEOUT' },
          createdAt: session.now,
        },
      ],
    });
}

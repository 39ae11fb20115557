/**
 * A worker's events for the items of map steps (attempts that name an item). The worker protocol is the
 * same as for a step, but an item is not a step: its events leave no row in the task's event log and no
 * dedup record. STEP_STARTED and STEP_PROGRESS are accepted and change nothing; STEP_COMPLETED and
 * STEP_FAILED end the item's attempt, and all of one map's in a batch are one fact (the map's counters,
 * kinds/map.ts). A retried report finds its item already ended by that attempt and is answered as a
 * duplicate; an attempt that is no longer its item's is STALE_EXECUTION (the worker stops it).
 */
import type { EventResult, WorkerEvent } from '@tdp/protocol';
import type { AttemptRecord, TaskState } from '../facts/records.ts';
import { inFactTransaction } from '../facts/session.ts';
import { sanitiseError } from '../facts/stateMachine.ts';
import type { FactWriteSet } from '../facts/writeSet.ts';
import { type ItemOutcome, isRunningMap, settleMapItems } from '../orchestration/kinds/map.ts';
import type { ItemResult } from '../orchestration/kinds/mapItems.ts';
import type { StatusDeps } from './deps.ts';

/** As the attempt inbox answers each event (workerInbox.ts `WorkerEventOutcome`). */
type WorkerEventOutcome =
  | { ok: true; result: EventResult }
  | { ok: false; code: 'STALE_EXECUTION'; refusedBy: 'status'; detail: string };

export interface ItemEvent {
  item: WorkerEvent;
  attempt: AttemptRecord & { itemIndex: number };
}

const stale = (detail: string): WorkerEventOutcome => ({
  ok: false,
  code: 'STALE_EXECUTION',
  refusedBy: 'status',
  detail,
});

function resultOf(item: WorkerEvent): ItemResult | null {
  if (item.eventType === 'STEP_COMPLETED') return { kind: 'SUCCEEDED', output: item.output ?? null };
  if (item.eventType === 'STEP_FAILED') {
    const error = sanitiseError(item.error, 'STEP_FAILED');
    // Category WORKER: the worker handed the attempt back (draining, restarted), as for a step.
    return { kind: 'FAILED', error, lost: error.category === 'WORKER' };
  }
  return null;
}

function accepted(
  state: TaskState,
  stepKey: string,
  item: WorkerEvent,
  duplicate: boolean,
  at: Date,
): EventResult {
  const step = state.steps.find((s) => s.key === stepKey && s.current);
  return {
    accepted: true,
    duplicate,
    stale: false,
    eventId: item.eventId,
    taskId: state.task.id,
    stepKey,
    stepId: stepKey,
    operationCode: step?.operationCode ?? null,
    taskVersion: state.task.version.toString(),
    stepVersion: step?.version.toString() ?? null,
    lifecycleStatus: state.task.lifecycleStatus,
    businessStatus: state.task.businessStatus,
    committedAt: at.toISOString(),
  };
}

/** The item events of one worker's batch, by map, in one transaction (with the batch's acks, if given). */
export async function recordMapItemEvents(
  deps: StatusDeps,
  events: ItemEvent[],
  commandAcks?: FactWriteSet['commandAcks'],
): Promise<WorkerEventOutcome[]> {
  const outcomes: WorkerEventOutcome[] = new Array(events.length);
  const byStep = new Map<string, number[]>();
  events.forEach(({ attempt }, i) => {
    const list = byStep.get(attempt.stepId) ?? [];
    list.push(i);
    byStep.set(attempt.stepId, list);
  });
  await inFactTransaction(
    deps,
    async (session) => {
      await session.prefetch(events.map((e) => e.attempt.taskId));
      // Task by task in id order (as prefetch locked them), so concurrent batches lock alike.
      const groups = [...byStep.values()].sort((a, b) =>
        events[a[0]!]!.attempt.taskId.localeCompare(events[b[0]!]!.attempt.taskId),
      );
      for (const indexes of groups) {
        const { taskId, stepId } = events[indexes[0]!]!.attempt;
        const before = await session.lockTask(taskId);
        const step = before?.steps.find((s) => s.id === stepId);
        if (!before || !isRunningMap(step)) {
          for (const i of indexes)
            outcomes[i] = stale(`the map step of attempt ${events[i]!.attempt.id} has ended`);
          continue;
        }
        const items = await session.tx.mapItemsAt(
          stepId,
          indexes.map((i) => events[i]!.attempt.itemIndex),
        );
        const byIndex = new Map(items.map((item) => [item.index, item]));
        const ending = indexes.filter((i) => resultOf(events[i]!.item) !== null);
        for (const i of indexes) {
          if (ending.includes(i)) continue;
          // STARTED / PROGRESS: accepted while the attempt is its item's running one.
          const { attempt, item } = events[i]!;
          const current = byIndex.get(attempt.itemIndex);
          outcomes[i] =
            current?.attemptId === attempt.id && current.status === 'RUNNING'
              ? { ok: true, result: accepted(before, step.key, item, false, session.now) }
              : stale(`attempt ${attempt.id} is not the running attempt of item ${attempt.itemIndex}`);
        }
        if (ending.length === 0) continue;
        const settled = await settleMapItems(
          deps,
          session,
          before,
          step,
          ending.map((i) => ({
            index: events[i]!.attempt.itemIndex,
            attemptId: events[i]!.attempt.id,
            result: resultOf(events[i]!.item)!,
          })),
          'tdp:worker',
          items,
        );
        ending.forEach((i, n) => {
          const outcome: ItemOutcome = settled.outcomes[n]!;
          const { attempt, item } = events[i]!;
          outcomes[i] =
            outcome === 'STALE'
              ? stale(`attempt ${attempt.id} is not the running attempt of item ${attempt.itemIndex}`)
              : {
                  ok: true,
                  result: accepted(settled.after, step.key, item, outcome === 'DUPLICATE', session.now),
                };
        });
      }
      if (commandAcks) await session.write({ commandAcks });
    },
    { deferWrites: true },
  );
  return outcomes;
}

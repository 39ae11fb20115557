/**
 * The map step (kind `map`): one capability attempt per item of an array, at most `maxParallel` at once,
 * the outputs in item order as the step's output. This module holds the map step's consequences: its begin, the
 * placement of its items on workers (each chosen and started through placement.ts, as every placement),
 * an item's end (from its worker, a lost worker, a timer; the timers are mapTimers.ts). The decisions
 * are pure (mapItems.ts); the scheduler, the status service and the lease reaper reach this module as
 * they reach the consequences (.dependency-cruiser.cjs).
 *
 * Storage: items are `map_item` rows, written once in bulk when the map begins; the map step row keeps
 * the counters (`waitingFor`). The map step has one scheduling request for its whole life: due while
 * it has room (`maxParallel`) and pending items, closed otherwise, made due again when an item ends.
 * An item's attempt is an ordinary attempt row naming its item, placed with an ordinary START_ATTEMPT.
 */
import type { StepDefinition, WaitingFor } from '@tdp/protocol';
import { newSchedulingRequest } from '../../facts/newRecords.ts';
import type { MapItemRecord, StepRecord, TaskState, WorkerCommandRecord } from '../../facts/records.ts';
import type { FactSession } from '../../facts/session.ts';
import { taskAfterStepChange } from '../../facts/stateMachine.ts';
import type { FactWriteSet } from '../../facts/writeSet.ts';
import { freeSlots, type WorkerCandidate } from '../../workers/selector.ts';
import { inputFailure } from '../advance.ts';
import { type ConsequenceDeps, failStepAttempt, stopRunningItems } from '../consequences.ts';
import {
  chooseWorker,
  type PlacementDeps,
  type StartRefusal,
  startAttempt,
  takeStartLimits,
} from '../placement.ts';
import { completePlatformStep, stepTimer, waitOnStep } from './finishStep.ts';
import {
  countersAfter,
  type ItemResult,
  initialCounters,
  itemInput,
  type MapCounters,
  mapFailure,
  mapItemsProblem,
  mapOutput,
  mapVerdict,
  otherMapItems,
  resolveMapItems,
  roomFor,
  settleItem,
} from './mapItems.ts';

type MapWaiting = Extract<WaitingFor, { kind: 'map' }>;

const countersOf = (step: StepRecord): MapCounters | null =>
  step.waitingFor?.kind === 'map' ? step.waitingFor : null;

const definitionOf = (state: TaskState, step: StepRecord): StepDefinition =>
  state.execution.snapshot.steps.find((d) => d.key === step.key)!;

/** A running map step of the current execution (its items may still change). */
export const isRunningMap = (step: StepRecord | undefined): step is StepRecord =>
  !!step?.current && step.status === 'RUNNING' && step.waitingFor?.kind === 'map';

/** The map's request for placement, due `at` (one row per step: created, or made due again). */
export function placementRequest(deps: ConsequenceDeps, state: TaskState, step: StepRecord, at: Date) {
  return newSchedulingRequest(deps.ids, state, step.id, at, at);
}

/** STEP_BEGIN of a map: its items are written, or it fails (no array) or succeeds at once (empty). */
export async function beginMap(
  deps: ConsequenceDeps,
  session: FactSession,
  before: TaskState,
  step: StepRecord,
  definition: StepDefinition,
): Promise<void> {
  const now = session.now;
  const resolved = resolveMapItems(before, definition);
  if (!resolved.ok) {
    await failStepAttempt(deps, session, before, step, {
      producer: 'tdp:orchestrator',
      error: { category: 'INPUT', code: resolved.code, retryable: false, userMessage: resolved.message },
      infrastructure: false,
      workerId: null,
      milestone: 'INPUT_INVALID',
    });
    return;
  }
  const total = resolved.items.length;
  const limits = deps.mapItemLimits;
  const tooMany = limits && mapItemsProblem(step.key, total, total + otherMapItems(before, step.id), limits);
  if (tooMany) {
    // Not retryable: the same list fails the same way. Counted as a refusal, as a create's is.
    deps.quotaRefused?.('MAP_ITEMS_LIMIT');
    await failStepAttempt(deps, session, before, step, {
      producer: 'tdp:orchestrator',
      error: { category: 'INPUT', code: 'MAP_ITEMS_LIMIT', retryable: false, userMessage: tooMany },
      infrastructure: false,
      workerId: null,
      milestone: 'INPUT_INVALID',
    });
    return;
  }
  if (total === 0) {
    await completePlatformStep(deps, session, before, step, [], {
      producer: 'tdp:orchestrator',
      milestone: 'MAP_FINISHED',
      message: `step ${step.key} maps over no items`,
    });
    return;
  }
  const waitingFor: MapWaiting = { kind: 'map', ...initialCounters(total), since: now.toISOString() };
  await waitOnStep(deps, session, before, step, waitingFor, {
    producer: 'tdp:orchestrator',
    milestone: 'MAP_STARTED',
    message: `step ${step.key} maps over ${total} items`,
    write: {
      newMapItems: [{ stepId: step.id, count: total, at: now }],
      schedulingRequests: [placementRequest(deps, before, step, now)],
    },
  });
}

/** The map step with new counters: one version on (its items changed, not its status). */
function withCounters(step: StepRecord, counters: MapCounters, at: Date): StepRecord {
  const waitingFor = step.waitingFor as MapWaiting;
  const done = counters.succeeded + counters.failed;
  return {
    ...step,
    waitingFor: { ...waitingFor, ...counters },
    progress: { current: done, total: counters.total, percent: Math.floor((done / counters.total) * 100) },
    version: step.version + 1n,
    updatedAt: at,
  };
}

/** Commits the map's counters as one fact (MAP_PROGRESS): the step row and the task's next version. */
async function commitProgress(
  deps: ConsequenceDeps,
  session: FactSession,
  before: TaskState,
  step: StepRecord,
  counters: MapCounters,
  producer: string,
  write: Omit<FactWriteSet, 'events' | 'outbox' | 'realtime' | 'dedup' | 'task' | 'steps'>,
): Promise<TaskState> {
  const at = session.now;
  const changed = withCounters(step, counters, at);
  const steps = before.steps.map((s) => (s.id === step.id ? changed : s));
  const moved = taskAfterStepChange(before.task, before.execution, steps, undefined, at);
  const after: TaskState = { task: moved.task, execution: moved.execution, steps };
  await session.commit(
    before,
    after,
    {
      id: deps.ids.newId(),
      type: 'MAP_PROGRESS',
      producer,
      payload: { ...counters },
      occurredAt: at,
      receivedAt: at,
      stepKey: step.key,
      stepAttempt: step.attempt,
      stepVersion: changed.version,
      operationCode: step.operationCode,
    },
    {
      write: {
        ...write,
        task: after.task,
        ...(after.execution !== before.execution ? { execution: after.execution } : {}),
        steps: [changed],
      },
    },
  );
  return after;
}

export type MapPlacement =
  /**
   * `waits`: room and items are left, but no worker slot, concurrency key slot or rate token for the
   * next one now; the request waits (for a worker, parked on the key, or until the next token).
   */
  | { kind: 'placed'; commands: WorkerCommandRecord[]; waits: StartRefusal | null }
  | StartRefusal
  /** Nothing to place now (the map is at `maxParallel`, or has ended): its request was closed. */
  | { kind: 'stale' };

const everyWorkerBusy: StartRefusal = {
  kind: 'unplaceable',
  reasons: ['every worker is at its concurrency limit'],
};

/**
 * The scheduler claimed the map's request: places its lowest pending items on workers (raising the
 * candidates' running counts), one attempt and one START_ATTEMPT each, and commits the counters. The
 * request stays due (deferred until a worker frees a slot) while room and pending items are left.
 */
export async function placeMapItems(
  deps: PlacementDeps,
  session: FactSession,
  before: TaskState,
  step: StepRecord,
  candidates: WorkerCandidate[],
): Promise<MapPlacement> {
  const now = session.now;
  const counters = countersOf(step);
  if (!isRunningMap(step) || !counters) return { kind: 'stale' };
  const definition = definitionOf(before, step);
  const room = roomFor(definition, counters);
  const free = freeSlots(candidates, now, deps.heartbeatTtlMs);
  const pending = room > 0 && free > 0 ? await session.tx.pendingMapItems(step.id, Math.min(room, free)) : [];
  if (pending.length === 0) {
    if (room > 0 && free === 0) return everyWorkerBusy;
    await session.write({ closeSchedulingRequests: { stepIds: [step.id], status: 'DISPATCHED' } });
    return { kind: 'stale' };
  }
  const resolved = resolveMapItems(before, definition);
  const values = resolved.ok ? resolved.items : [];
  const inputs = pending.map((item) => itemInput(before, definition, values[item.index], item.index));
  // An item whose input cannot be built fails first, on its own (it may end the map); the others are
  // placed in the next round.
  const failed = pending.flatMap((item, i) => {
    const input = inputs[i]!;
    return input.ok
      ? []
      : [
          {
            index: item.index,
            attemptId: null,
            result: {
              kind: 'FAILED' as const,
              error: inputFailure(input),
              lost: false,
            },
          },
        ];
  });
  if (failed.length > 0) {
    await settleMapItems(deps.status, session, before, step, failed, 'tdp:scheduler', pending);
    return { kind: 'stale' };
  }
  const placed: MapItemRecord[] = [];
  const commands: WorkerCommandRecord[] = [];
  const attempts: NonNullable<FactWriteSet['attempts']> = [];
  const timers: NonNullable<FactWriteSet['timers']> = [];
  let refusal: StartRefusal | null = null;
  for (const [i, item] of pending.entries()) {
    const input = inputs[i]!;
    if (!input.ok) continue;
    const selection = chooseWorker(deps, candidates, step, definition, now);
    if (!selection.ok) {
      refusal = { kind: 'unplaceable', reasons: selection.reasons };
      break;
    }
    // Each item's attempt holds its own slot of the map's concurrency keys and takes its own token.
    refusal = await takeStartLimits(session, before, step, definition, item.index);
    if (refusal) break;
    // The item's attempt is bound to the map step, with the item's own attempt number; its run
    // continues the task's trace (no span of its own for the round).
    const itemStep: StepRecord = { ...step, attempt: item.attempt + 1 };
    const { attempt, command } = await startAttempt(
      deps.status,
      candidates,
      selection,
      {
        state: before,
        step: itemStep,
        definition,
        input: input.value,
        itemIndex: item.index,
        traceparent: before.execution.snapshot.traceparent,
      },
      now,
    );
    commands.push(command);
    attempts.push(attempt);
    // An item attempt still open after the map step's startToCloseMs fails as timed out (and is retried).
    const limitMs = definition.timeouts.startToCloseMs;
    if (limitMs !== undefined)
      timers.push(
        stepTimer(deps.status, before, step, 'MAP_ITEM_TIMEOUT', new Date(now.getTime() + limitMs), now, {
          index: item.index,
          attemptId: attempt.id,
          limitMs,
        }),
      );
    placed.push({
      ...item,
      status: 'RUNNING',
      attempt: itemStep.attempt,
      attemptId: attempt.id,
      updatedAt: now,
    });
  }
  if (placed.length === 0) return refusal ?? everyWorkerBusy;
  const next = countersAfter(
    counters,
    placed.map(() => ({ from: 'PENDING' as const, to: 'RUNNING' as const })),
  );
  // Room and pending items left, and nothing free for them now: the request waits (for what refused the
  // next item, or for a worker slot when the free ones ran out).
  const waits =
    roomFor(definition, next) > 0 &&
    (placed.length < pending.length || pending.length === Math.min(room, free))
      ? (refusal ?? everyWorkerBusy)
      : null;
  await commitProgress(deps.status, session, before, step, next, 'tdp:scheduler', {
    mapItems: placed,
    attempts,
    workerCommands: commands,
    timers,
    ...(waits ? {} : { closeSchedulingRequests: { stepIds: [step.id], status: 'DISPATCHED' } }),
  });
  return { kind: 'placed', commands, waits };
}

/** How one reported item attempt was taken. */
export type ItemOutcome = 'APPLIED' | 'DUPLICATE' | 'STALE';

/**
 * Item attempts ended (their worker reported, the worker was lost, the input could not be built): each
 * item moves on (succeeded, failed, waiting for a retry), its attempt is revoked, and the map's counters
 * are one fact. When the map is over — every item finished, or one failed for good under FAIL_ALL — the
 * map step succeeds with the outputs in item order, or fails (its open items cancelled), in the same
 * transaction. `known`: items the caller read already in this transaction.
 */
export async function settleMapItems(
  deps: ConsequenceDeps,
  session: FactSession,
  before: TaskState,
  step: StepRecord,
  results: { index: number; attemptId: string | null; result: ItemResult }[],
  producer: string,
  known: MapItemRecord[] = [],
): Promise<{ outcomes: ItemOutcome[]; after: TaskState }> {
  const now = session.now;
  const counters = countersOf(step);
  if (!isRunningMap(step) || !counters) return { outcomes: results.map(() => 'STALE'), after: before };
  const definition = definitionOf(before, step);
  const byIndex = new Map(known.map((i) => [i.index, i]));
  const unread = [...new Set(results.map((r) => r.index))].filter((i) => !byIndex.has(i));
  if (unread.length > 0)
    for (const item of await session.tx.mapItemsAt(step.id, unread)) byIndex.set(item.index, item);
  const changed = new Map<number, MapItemRecord>();
  const moves: { from: MapItemRecord['status']; to: MapItemRecord['status'] }[] = [];
  const revoke: string[] = [];
  const timers: NonNullable<FactWriteSet['timers']> = [];
  const failedNow: MapItemRecord[] = [];
  const outcomes = results.map(({ index, attemptId, result }): ItemOutcome => {
    const item = changed.get(index) ?? byIndex.get(index);
    if (!item || item.attemptId !== attemptId) return 'STALE';
    if (item.status !== 'RUNNING' && !(attemptId === null && item.status === 'PENDING'))
      return item.status === 'SUCCEEDED' || item.status === 'FAILED' ? 'DUPLICATE' : 'STALE';
    const change = settleItem(definition, item, result, now);
    changed.set(index, change.item);
    // An input that could not be built was never counted as running.
    moves.push({ from: item.status, to: change.item.status });
    if (attemptId) revoke.push(attemptId);
    if (change.kind === 'FAILED') failedNow.push(change.item);
    if (change.kind === 'RETRY')
      timers.push(
        stepTimer(deps, before, step, 'MAP_ITEM_RETRY_DUE', new Date(now.getTime() + change.delayMs), now, {
          index,
          itemAttempt: change.item.attempt,
        }),
      );
    return 'APPLIED';
  });
  if (changed.size === 0) return { outcomes, after: before };
  const next = countersAfter(counters, moves);
  const verdict = mapVerdict(definition, next, failedNow);
  const items = [...changed.values()];
  if (verdict.kind === 'RUNNING') {
    const reopen = roomFor(definition, next) > 0;
    const after = await commitProgress(deps, session, before, step, next, producer, {
      mapItems: items,
      revokeAttemptIds: revoke,
      timers,
      ...(reopen ? { reopenSchedulingRequests: [placementRequest(deps, before, step, now)] } : {}),
    });
    return { outcomes, after };
  }
  const counted = withCounters(step, next, now);
  const state: TaskState = { ...before, steps: before.steps.map((s) => (s.id === step.id ? counted : s)) };
  // The map is over: the attempts of the items still running in the database (those settled now, and
  // under FAIL_ALL the others) are revoked and its open items cancelled, by one statement each.
  const closing = { mapItems: items, closeMapItems: { stepIds: [step.id], at: now } };
  if (verdict.kind === 'FAILED') {
    const stops = await stopRunningItems(deps, session, [step.id], 'MAP_ITEM_FAILED', new Set(revoke));
    await session.write({ ...closing, workerCommands: stops });
    const after = await failStepAttempt(deps, session, state, counted, {
      producer,
      error: mapFailure(step, verdict.item),
      infrastructure: false,
      workerId: null,
      milestone: 'MAP_ITEM_FAILED',
    });
    return { outcomes, after };
  }
  const all = (await session.tx.allMapItems(step.id)).map((i) => changed.get(i.index) ?? i);
  await session.write({
    ...closing,
    closeSchedulingRequests: { stepIds: [step.id], status: 'DISPATCHED' },
  });
  const after = await completePlatformStep(deps, session, state, counted, mapOutput(definition, all), {
    producer,
    milestone: 'MAP_FINISHED',
    message: `step ${step.key}: ${next.succeeded} of ${next.total} items succeeded${next.failed > 0 ? `, ${next.failed} failed` : ''}`,
    payload: { ...next },
  });
  return { outcomes, after };
}

/**
 * Placement: the one home of putting ready work on workers, beside the consequences. Every placer —
 * a create placing its roots (tasks/createTask.ts), the scheduler's round (workers/dispatch.ts), a map
 * placing its items (kinds/map.ts) — goes through it inside the fact session it holds:
 *
 * 1. `lockCandidates`: capacity is re-checked in the placing transaction. The candidates were read
 *    outside it, so another replica's round, or a create placing its first steps, may have filled a
 *    worker since. The workers that look free (`workersToLock`, least loaded first) are locked
 *    (`FactTransaction.lockWorkerCapacity`, an advisory lock per worker held until commit), before any
 *    task, and placed from their open-attempt counts as read under the lock (`withLockedLoads`): the next
 *    placer's count then includes this one's attempts.
 * 2. `chooseWorker`: the pure selector (`workers/selector.ts`) decides: hard filters, then the score.
 * 3. `startAttempt`: the attempt on the chosen worker and its START_ATTEMPT command; the worker's counts
 *    are raised in the candidates, so the next choice in the same transaction sees the attempt.
 *
 * `placeStep` is the whole of it for one READY step, committed as STEP_DISPATCHED. A map's items are
 * placed by kinds/map.ts with the same `chooseWorker` and `startAttempt`, committed as its progress.
 */
import type { StepDefinition } from '@tdp/protocol';
import { heldKeyReason, poolLockKey, resolveConcurrencyKeys } from '../definitions/concurrencyKeys.ts';
import { rateLimitReason, resolveRateLimits } from '../definitions/rateLimits.ts';
import { isTerminal } from '../facts/execution.ts';
import { singletonPool } from '../facts/ports.ts';
import type {
  AttemptRecord,
  StepRecord,
  TaskState,
  TimelineRecord,
  WorkerCommandRecord,
} from '../facts/records.ts';
import type { FactSession } from '../facts/session.ts';
import { taskAfterStepChange } from '../facts/stateMachine.ts';
import { noTracing, type Tracing } from '../shared/ports.ts';
import { issueContext, newAttempt } from '../workers/attempts.ts';
import {
  type Selection,
  selectWorker,
  type WorkerCandidate,
  withLockedLoads,
  workersToLock,
} from '../workers/selector.ts';
import { inputFailure } from './advance.ts';
import { type ConsequenceDeps, failStepAttempt } from './consequences.ts';
import { milestone, platformWorkerProducer, resolvePlatformInput } from './transitionRecords.ts';

/** Placing writes with the consequences' deps (ids, credentials), and knows which workers still count. */
export interface PlacementDeps {
  status: ConsequenceDeps & { tracing?: Tracing };
  heartbeatTtlMs: number;
}

/** A worker the selector chose. */
export type ChosenWorker = Extract<Selection, { ok: true }>;

/**
 * Locks the workers of `candidates` that look free and returns copies of the candidates with the counts
 * read under the lock: the workers this transaction places on (one that looked free but was not locked
 * counts as full). `all`: every such worker, waiting for each, in id order (the scheduler's round).
 * `firstFree`: the least loaded one no other placer holds, without waiting (a create, so concurrent
 * creates spread over the workers). `capabilities`: only workers offering one of them are locked.
 */
export async function lockCandidates(
  deps: Pick<PlacementDeps, 'heartbeatTtlMs'>,
  session: FactSession,
  candidates: WorkerCandidate[],
  lock: { mode: 'all' | 'firstFree'; capabilities?: string[] },
): Promise<WorkerCandidate[]> {
  const ttl = deps.heartbeatTtlMs;
  const toLock = workersToLock(candidates, session.now, ttl, lock.capabilities);
  const loads = await session.tx.lockWorkerCapacity(toLock, lock.mode);
  return withLockedLoads(candidates, loads, session.now, ttl);
}

/** The selector's choice among `candidates` for an attempt of `step` (its capability, the affinity). */
export function chooseWorker(
  deps: Pick<PlacementDeps, 'heartbeatTtlMs'>,
  candidates: WorkerCandidate[],
  step: StepRecord,
  definition: StepDefinition,
  now: Date,
): Selection {
  return selectWorker(
    candidates,
    {
      capability: step.capability,
      capabilityVersion: step.capabilityVersion,
      affinity: definition.affinity,
    },
    now,
    deps.heartbeatTtlMs,
  );
}

/** One attempt to start on a chosen worker. */
export interface AttemptStart {
  state: TaskState;
  /** The step, with the number of the attempt to start (a map item's own number for an item). */
  step: StepRecord;
  definition: StepDefinition;
  /** The step's (or item's) resolved input. */
  input: unknown;
  /** The map item the attempt runs; absent for a step's own attempt. */
  itemIndex?: number;
  /** The trace the worker's run continues, if any. */
  traceparent: string | undefined;
}

/**
 * Starts an attempt on the chosen worker: the attempt row, and the START_ATTEMPT command that hands the
 * worker the input and the attempt's credentials. Raises the worker's counts in `candidates`. The caller
 * writes both with its fact and sends the command after the commit.
 */
export async function startAttempt(
  deps: PlacementDeps['status'],
  candidates: WorkerCandidate[],
  chosen: ChosenWorker,
  start: AttemptStart,
  now: Date,
): Promise<{ attempt: AttemptRecord; command: WorkerCommandRecord }> {
  const { state, step, definition } = start;
  const attempt = newAttempt(
    deps,
    state,
    step,
    platformWorkerProducer,
    null,
    now,
    chosen.workerId,
    start.itemIndex ?? null,
  );
  // The command takes the context's token and heartbeat interval, which depend on the task, the step's
  // key, attempt number and heartbeat settings and the attempt, not on the step's status or the task's
  // version: the state before the placement serves.
  const context = await issueContext(deps, state, step, attempt, true);
  const command: WorkerCommandRecord = {
    id: deps.ids.newId(),
    workerId: chosen.workerId,
    type: 'START_ATTEMPT',
    payload: {
      attemptId: attempt.id,
      leaseVersion: attempt.leaseVersion,
      taskId: state.task.id,
      executionId: state.execution.id,
      stepKey: step.key,
      stepId: step.key,
      attempt: step.attempt,
      capability: step.capability,
      capabilityVersion: step.capabilityVersion,
      input: start.input,
      executionToken: context.executionToken,
      heartbeatIntervalSeconds: context.heartbeatIntervalSeconds,
      timeouts: definition.timeouts,
      ...(start.traceparent ? { traceparent: start.traceparent } : {}),
    },
    createdAt: now,
  };
  const worker = candidates.find((c) => c.workerId === chosen.workerId)!;
  worker.runningAttempts += 1;
  worker.runningByCapability[step.capability] = (worker.runningByCapability[step.capability] ?? 0) + 1;
  return { attempt, command };
}

/**
 * The timeline's "waiting for a worker" milestone when a ready step could not be placed: only when the
 * reasons differ from those stored with its request at the last try (null otherwise), so a step that
 * waits says so once and again when the reason changes, not on every scheduler round. The reasons are
 * stored with the deferral in the same transaction, so a restart does not repeat the milestone.
 */
export function waitingForWorker(
  ids: PlacementDeps['status']['ids'],
  state: TaskState,
  stepId: string,
  previous: readonly string[],
  reasons: readonly string[],
  at: Date,
): TimelineRecord | null {
  const step = state.steps.find((s) => s.id === stepId);
  if (!step || reasons.length === 0 || sameReasons(previous, reasons)) return null;
  const reason = reasons.join('; ');
  return milestone(
    ids,
    state,
    'WAITING_FOR_WORKER',
    `step ${step.key} is waiting for a worker: ${reason}`,
    { stepId: step.key, attempt: step.attempt, reasons: [...reasons] },
    at,
  );
}

function sameReasons(a: readonly string[], b: readonly string[]): boolean {
  if (a.length !== b.length) return false;
  const sortedB = [...b].sort();
  return [...a].sort().every((r, i) => r === sortedB[i]);
}

/** The pool locks placing this step may take (`poolLockKey`): its concurrency keys' and rate limits'. */
export function placementPoolLocks(state: TaskState, stepId: string): string[] {
  const step = state.steps.find((s) => s.id === stepId);
  const definition = step && state.execution.snapshot.steps.find((d) => d.key === step.key);
  if (!definition) return [];
  const { tenantId } = state.task;
  return [
    ...resolveConcurrencyKeys(definition, state.task).map((k) =>
      poolLockKey('concurrency', tenantId, k.name, k.value),
    ),
    ...resolveRateLimits(definition, state.task).map((k) => poolLockKey('rate', tenantId, k.name, k.value)),
  ];
}

export type Placement =
  | { kind: 'placed'; command: WorkerCommandRecord }
  /** The step no longer waits for a worker (it moved on, or its execution ended). */
  | { kind: 'stale' }
  /**
   * No worker could take it (`waitsForCapacity`: one would, but for the attempts it runs), or
   * (`parkedOn`) a concurrency key pool (or a paused rate limit, or another task's singleton key) holds
   * it until a slot frees, or a rate limit's bucket has no token until `availableAt`.
   */
  | {
      kind: 'unplaceable';
      reasons: string[];
      waitsForCapacity?: boolean;
      parkedOn?: { name: string; value: string; limit: number };
      availableAt?: Date;
    }
  /** Its input could not be resolved (the step was failed, if asked to). */
  | { kind: 'invalid' };

/** Why an attempt may not start yet: a concurrency key pool or a rate limit holds it. */
export type StartRefusal = Extract<Placement, { kind: 'unplaceable' }>;

/**
 * The step's limits, for one attempt about to start (of the step, or of one map item): a slot of each of
 * its concurrency key pools, then a token of each rate limit's bucket — after the slots, so an attempt a
 * full pool parks spends no token, and a refusal gives the slots back. Null: held and taken. The pools
 * and buckets stay locked until commit.
 */
export async function takeStartLimits(
  session: FactSession,
  state: TaskState,
  step: StepRecord,
  definition: StepDefinition,
  itemIndex?: number,
): Promise<StartRefusal | null> {
  const now = session.now;
  const { tenantId, id: taskId } = state.task;
  const keys = resolveConcurrencyKeys(definition, state.task);
  if (keys.length > 0) {
    const refused = await session.tx.holdConcurrency({
      tenantId,
      taskId,
      stepId: step.id,
      itemIndex,
      keys,
      at: now,
    });
    if (refused)
      return {
        kind: 'unplaceable',
        reasons: [heldKeyReason(refused.key, refused.running, refused.limit, refused.paused)],
        parkedOn: { ...refused.key, limit: refused.limit },
      };
  }
  const rated = resolveRateLimits(definition, state.task);
  if (rated.length === 0) return null;
  const limited = await session.tx.takeRateTokens({ tenantId, keys: rated, at: now });
  if (!limited) return null;
  if (keys.length > 0) await session.tx.dropHeldSlots(step.id, itemIndex, now);
  // Paused: parked like a paused concurrency key's steps (the resume lets them in).
  if (limited.paused)
    return {
      kind: 'unplaceable',
      reasons: [heldKeyReason(limited.key, 0, limited.limit, true)],
      parkedOn: { ...limited.key, limit: limited.limit },
    };
  return {
    kind: 'unplaceable',
    reasons: [rateLimitReason(limited.key, limited, limited.nextAt)],
    availableAt: limited.nextAt,
  };
}

/**
 * Places one READY step inside the session: chooses a worker among `candidates` (whose running counts it
 * raises), then commits the attempt, the START_ATTEMPT command, the timeout timers, the milestone and the
 * STEP_DISPATCHED fact. The caller locked the task (`before`) and sends the command after the commit.
 */
export function placeStep(
  deps: PlacementDeps,
  session: FactSession,
  before: TaskState | null,
  stepId: string,
  candidates: WorkerCandidate[],
  failInvalidInput: boolean,
): Promise<Placement> {
  // The span continues the create's trace (kept in the snapshot), on whichever replica places the step.
  const attributes = { taskId: before?.task.id, executionId: before?.execution.id, stepId };
  return (deps.status.tracing ?? noTracing).inSpan(
    'tdp.schedule.place',
    { parent: before?.execution.snapshot.traceparent, attributes },
    () => placeInSpan(deps, session, before, stepId, candidates, failInvalidInput),
  );
}

async function placeInSpan(
  deps: PlacementDeps,
  session: FactSession,
  before: TaskState | null,
  stepId: string,
  candidates: WorkerCandidate[],
  failInvalidInput: boolean,
): Promise<Placement> {
  const now = session.now;
  const step = before?.steps.find((s) => s.id === stepId);
  if (
    !before ||
    !step?.current ||
    step.status !== 'READY' ||
    step.attemptId ||
    isTerminal(before.execution.status)
  ) {
    return { kind: 'stale' };
  }
  // A task waiting for its singleton key: first, so it takes the key in its turn even while no worker
  // is free, and a step it parks neither holds a slot nor spends a token.
  const singleton = before.execution.snapshot.singleton;
  if (singleton) {
    const { applicationId, id } = before.task;
    const held = await session.tx.takeSingleton(applicationId, singleton.key, id, now);
    if (held)
      return {
        kind: 'unplaceable',
        reasons: [`singleton ${singleton.key}: held by task ${held.heldBy} until it finishes`],
        parkedOn: { name: singletonPool, value: singleton.key, limit: 1 },
      };
  }
  const definition = before.execution.snapshot.steps.find((d) => d.key === step.key)!;
  const selection = chooseWorker(deps, candidates, step, definition, now);
  if (!selection.ok)
    return { kind: 'unplaceable', reasons: selection.reasons, waitsForCapacity: selection.waitsForCapacity };
  const input = resolvePlatformInput(before, step);
  if (!input.ok) {
    if (!failInvalidInput) return { kind: 'invalid' };
    await failStepAttempt(deps.status, session, before, step, {
      producer: 'tdp:scheduler',
      error: inputFailure(input),
      infrastructure: false,
      workerId: null,
      milestone: 'INPUT_INVALID',
    });
    return { kind: 'invalid' };
  }
  const limited = await takeStartLimits(session, before, step, definition);
  if (limited) return limited;
  // The worker's run continues this placement's span.
  const traceparent = deps.status.tracing?.traceparent();
  const start = { state: before, step, definition, input: input.value, traceparent };
  const { attempt, command } = await startAttempt(deps.status, candidates, selection, start, now);
  const queued: StepRecord = {
    ...step,
    status: 'QUEUED',
    attemptId: attempt.id,
    version: step.version + 1n,
    updatedAt: now,
  };
  const steps = before.steps.map((s) => (s.id === step.id ? queued : s));
  const moved = taskAfterStepChange(before.task, before.execution, steps, undefined, now);
  const after: TaskState = { task: moved.task, execution: moved.execution, steps };
  await session.commit(
    before,
    after,
    {
      id: deps.status.ids.newId(),
      type: 'STEP_DISPATCHED',
      producer: 'tdp:scheduler',
      payload: { workerId: selection.workerId, nodeId: selection.nodeId, score: selection.score },
      occurredAt: now,
      receivedAt: now,
      stepKey: step.key,
      stepAttempt: step.attempt,
      attemptId: attempt.id,
      stepVersion: queued.version,
      operationCode: step.operationCode,
    },
    {
      write: {
        task: after.task,
        ...(after.execution !== before.execution ? { execution: after.execution } : {}),
        steps: [queued],
        attempts: [attempt],
        closeSchedulingRequests: { stepIds: [step.id], status: 'DISPATCHED' },
        workerCommands: [command],
        // Both limits run from the placement; the heartbeat timer re-arms itself while beats arrive.
        timers: (
          [
            ['START_TO_CLOSE', definition.timeouts.startToCloseMs],
            ['HEARTBEAT_TIMEOUT', definition.timeouts.heartbeatMs],
          ] as const
        )
          .filter(([, limitMs]) => limitMs !== undefined)
          .map(([kind, limitMs]) => ({
            id: deps.status.ids.newId(),
            kind,
            taskId: before.task.id,
            stepId: step.id,
            payload: { attemptId: attempt.id, limitMs },
            availableAt: new Date(now.getTime() + limitMs!),
            createdAt: now,
          })),
        timeline: [
          milestone(
            deps.status.ids,
            after,
            'WORKER_SELECTED',
            `step ${step.key} attempt ${step.attempt} → worker ${selection.workerId} on ${selection.nodeId} (score ${selection.score})`,
            {
              stepId: step.key,
              workerId: selection.workerId,
              nodeId: selection.nodeId,
              score: selection.score,
            },
            now,
          ),
        ],
      },
    },
  );
  return { kind: 'placed', command };
}

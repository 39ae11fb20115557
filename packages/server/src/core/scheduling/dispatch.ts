/**
 * The dispatch transaction (document 000 §4): claim ready requests by priority then age, choose a worker
 * with the pure selector, and — under a transaction-scoped advisory lock on step + attempt, after
 * re-checking that the execution is open and the step still waits — create the attempt, the durable
 * START_ATTEMPT command and the milestone, and reserve the worker's capacity. The worker is woken after
 * the commit; if that wake-up is lost, the command is still there. A request nobody can take stays
 * queued with its reasons and is tried again later (or at once when a worker registers).
 */

import { isTerminal } from '../facts/execution.ts';
import type { StepRecord, TaskState, WorkerCommandRecord } from '../facts/records.ts';
import { type FactSession, inFactTransaction } from '../facts/session.ts';
import { taskAfterStepChange } from '../facts/stateMachine.ts';
import { failStepAttempt } from '../orchestration/failStep.ts';
import { milestone, platformWorkerProducer, resolvePlatformInput } from '../orchestration/platform.ts';
import type { StatusDeps } from '../status/deps.ts';
import { issueContext, newAttempt } from '../status/executions.ts';
import type { WorkerStore } from './ports.ts';
import { selectWorker, type WorkerCandidate } from './selector.ts';

export interface DispatchDeps {
  status: StatusDeps;
  workers: WorkerStore;
  heartbeatTtlMs: number;
  /** Called after the commit with the commands it wrote, for the workers' open streams. */
  wake: (commands: WorkerCommandRecord[]) => void;
  retryUnplaceableMs: number;
  /** Called when worker sessions were ended (lost), so no placement trusts an older view of them. */
  workersEnded?: () => void;
  /** Called after each round; `full` means more requests are waiting. */
  roundDone?: (full: boolean) => void;
}

/** One round: up to `limit` requests. Returns how many were claimed (placed, deferred or closed). */
export async function dispatchReady(deps: DispatchDeps, limit: number): Promise<number> {
  const sent: WorkerCommandRecord[] = [];
  // Read alongside the claim (another connection), not before it.
  const candidatesRead = deps.workers.candidates();
  candidatesRead.catch(() => {});
  const claimed = await inFactTransaction(
    deps.status,
    async (session) => {
      const [requests, candidates] = await Promise.all([
        session.tx.claimSchedulingRequests(session.now, limit),
        candidatesRead,
      ]);
      const now = session.now;
      // Every claimed step's advisory lock and task lock, in one round trip; then no reads until commit.
      await Promise.all([
        session.tx.advisoryLocks(requests.map((r) => `dispatch:${r.stepId}`)),
        session.prefetch(
          requests.map((r) => r.taskId),
          [],
          { workflows: true },
        ),
      ]);
      const deferred: { id: string; reasons: string[] }[] = [];
      for (const request of requests) {
        const before = await session.lockTask(request.taskId);
        const placement = await placeStep(deps, session, before, request.stepId, candidates, true);
        if (placement.kind === 'placed') sent.push(placement.command);
        else if (placement.kind === 'stale')
          await session.write({
            closeSchedulingRequests: { stepIds: [request.stepId], status: 'CANCELED' },
          });
        else if (placement.kind === 'unplaceable')
          deferred.push({ id: request.id, reasons: placement.reasons });
      }
      // All of the round's unplaceable requests in one statement (with no worker up, that is every one).
      if (deferred.length > 0)
        await session.tx.deferSchedulingRequests(deferred, new Date(now.getTime() + deps.retryUnplaceableMs));
      return requests.length;
    },
    { deferWrites: true },
  );
  if (sent.length > 0) deps.wake(sent);
  deps.roundDone?.(claimed === limit);
  return claimed;
}

export type Placement =
  | { kind: 'placed'; command: WorkerCommandRecord }
  /** The step no longer waits for a worker (it moved on, or its execution ended). */
  | { kind: 'stale' }
  | { kind: 'unplaceable'; reasons: string[] }
  /** Its input could not be resolved (the step was failed, if asked to). */
  | { kind: 'invalid' };

/**
 * Places one READY step inside the session: chooses a worker among `candidates` (whose running counts it
 * raises), then commits the attempt, the START_ATTEMPT command, the timeout timers, the milestone and the
 * STEP_DISPATCHED fact. The caller locked the task (`before`) and sends the command after the commit.
 */
export async function placeStep(
  deps: Pick<DispatchDeps, 'status' | 'heartbeatTtlMs'>,
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
  const definition = before.execution.snapshot.steps.find((d) => d.key === step.key)!;
  const selection = selectWorker(
    candidates,
    {
      capability: step.capability,
      capabilityVersion: step.capabilityVersion,
      affinity: definition.affinity,
    },
    now,
    deps.heartbeatTtlMs,
  );
  if (!selection.ok) return { kind: 'unplaceable', reasons: selection.reasons };
  const input = resolvePlatformInput(before, step);
  if (!input.ok) {
    if (!failInvalidInput) return { kind: 'invalid' };
    await failStepAttempt(deps.status, session, before, step, {
      producer: 'tdp:scheduler',
      error: { category: 'INPUT', code: input.code, retryable: false, userMessage: input.message },
      infrastructure: false,
      workerId: null,
      milestone: 'INPUT_INVALID',
    });
    return { kind: 'invalid' };
  }
  const attempt = newAttempt(
    deps.status,
    before,
    step,
    platformWorkerProducer,
    null,
    now,
    selection.workerId,
  );
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
  const context = await issueContext(deps.status, after, queued, attempt, true);
  const command: WorkerCommandRecord = {
    id: deps.status.ids.newId(),
    workerId: selection.workerId,
    type: 'START_ATTEMPT',
    payload: {
      attemptId: attempt.id,
      leaseVersion: attempt.leaseVersion,
      taskId: before.task.id,
      executionId: before.execution.id,
      stepId: step.key,
      attempt: step.attempt,
      capability: step.capability,
      capabilityVersion: step.capabilityVersion,
      input: input.value,
      executionToken: context.executionToken,
      heartbeatIntervalSeconds: context.heartbeatIntervalSeconds,
      timeouts: definition.timeouts,
    },
    createdAt: now,
  };
  const chosen = candidates.find((c) => c.workerId === selection.workerId)!;
  chosen.runningAttempts += 1;
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

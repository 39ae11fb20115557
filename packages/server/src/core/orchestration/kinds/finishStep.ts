/**
 * The facts of a step the platform runs itself (sleep, signal, approval, map, child task): it starts
 * waiting, or it succeeds with an output — each with the orchestration that follows, in the session's
 * transaction. Failing one is `failStepAttempt` (consequences.ts) with no worker.
 */
import type { WaitingFor } from '@tdp/protocol';
import type { ChannelNotice } from '../../facts/projections.ts';
import type { StepRecord, TaskState, TimerRecord } from '../../facts/records.ts';
import type { FactSession } from '../../facts/session.ts';
import { taskAfterStepChange } from '../../facts/stateMachine.ts';
import type { FactWriteSet } from '../../facts/writeSet.ts';
import { type ConsequenceDeps, finishTask } from '../consequences.ts';
import { milestone, orchestrate, stepsToWrite } from '../transitionRecords.ts';

/** Upstream outputs are read as the step's data in this schema (see `stepOutputs`). */
export const outputSchema = 'tdp.output.v1';

export interface PlatformStepOutcome {
  /** `tdp:timer`, `application:<id>`, `user:<id>`, … */
  producer: string;
  /** The timeline milestone's kind and sentence. */
  milestone: string;
  message: string;
  payload?: Record<string, unknown>;
  /** More rows of the same fact (a consumed signal, a decision, …). */
  write?: Omit<FactWriteSet, 'events' | 'outbox' | 'realtime' | 'dedup' | 'task' | 'steps'>;
}

/** The step succeeds with `output`; what follows (next steps, the task's end) is in the same transaction. */
export async function completePlatformStep(
  deps: ConsequenceDeps,
  session: FactSession,
  before: TaskState,
  step: StepRecord,
  output: unknown,
  outcome: PlatformStepOutcome,
): Promise<TaskState> {
  const at = session.now;
  const succeeded: StepRecord = {
    ...step,
    status: 'SUCCEEDED',
    startedAt: step.startedAt ?? at,
    finishedAt: at,
    dataSchema: outputSchema,
    stateData: output,
    waitingFor: null,
    progress: { ...(step.progress ?? {}), percent: 100 },
    version: step.version + 1n,
    updatedAt: at,
  };
  const orchestrated = orchestrate(
    deps.ids,
    { ...before, steps: before.steps.map((s) => (s.id === step.id ? succeeded : s)) },
    { kind: 'STEP_SUCCEEDED', stepKey: step.key },
    at,
  );
  const moved = taskAfterStepChange(before.task, before.execution, orchestrated.state.steps, undefined, at);
  const after: TaskState = { task: moved.task, execution: moved.execution, steps: orchestrated.state.steps };
  const extra = outcome.write ?? {};
  await session.commit(
    before,
    after,
    {
      id: deps.ids.newId(),
      type: 'STEP_COMPLETED',
      producer: outcome.producer,
      payload: outcome.payload ?? {},
      occurredAt: at,
      receivedAt: at,
      stepKey: step.key,
      stepAttempt: step.attempt,
      stepVersion: succeeded.version,
      operationCode: step.operationCode,
      dataSchema: outputSchema,
    },
    {
      write: {
        ...extra,
        task: after.task,
        ...(after.execution !== before.execution ? { execution: after.execution } : {}),
        steps: stepsToWrite(succeeded, orchestrated),
        ...orchestrated.write,
        timers: [...(extra.timers ?? []), ...(orchestrated.write.timers ?? [])],
        timeline: [
          milestone(deps.ids, after, outcome.milestone, outcome.message, { stepId: step.key }, at),
          ...(extra.timeline ?? []),
          ...(orchestrated.write.timeline ?? []),
        ],
      },
    },
  );
  if (orchestrated.end) await finishTask(deps, session, after, orchestrated.end);
  return after;
}

/** The step waits for `waitingFor` (shown on the task), with the timers that end the wait. */
export async function waitOnStep(
  deps: ConsequenceDeps,
  session: FactSession,
  before: TaskState,
  step: StepRecord,
  waitingFor: WaitingFor,
  outcome: PlatformStepOutcome & {
    timers?: TimerRecord[];
    businessStatus?: string;
    /** A notice for some summary channels only (an approval's approvers). */
    channelNotice?: ChannelNotice;
  },
): Promise<TaskState> {
  const at = session.now;
  const waiting: StepRecord = { ...step, waitingFor, version: step.version + 1n, updatedAt: at };
  const steps = before.steps.map((s) => (s.id === step.id ? waiting : s));
  const moved = taskAfterStepChange(before.task, before.execution, steps, outcome.businessStatus, at);
  const after: TaskState = { task: moved.task, execution: moved.execution, steps };
  const extra = outcome.write ?? {};
  await session.commit(
    before,
    after,
    {
      id: deps.ids.newId(),
      type: 'STEP_WAITING',
      producer: outcome.producer,
      payload: { waitingFor, ...(outcome.payload ?? {}) },
      occurredAt: at,
      receivedAt: at,
      stepKey: step.key,
      stepAttempt: step.attempt,
      stepVersion: waiting.version,
      operationCode: step.operationCode,
    },
    {
      write: {
        ...extra,
        task: after.task,
        ...(after.execution !== before.execution ? { execution: after.execution } : {}),
        steps: [waiting],
        timers: [...(extra.timers ?? []), ...(outcome.timers ?? [])],
        timeline: [
          milestone(
            deps.ids,
            after,
            outcome.milestone,
            outcome.message,
            { stepId: step.key, waitingFor },
            at,
          ),
          ...(extra.timeline ?? []),
        ],
      },
      ...(outcome.channelNotice ? { channelNotice: outcome.channelNotice } : {}),
    },
  );
  return after;
}

/** A timer on the step, due at `at`. */
export function stepTimer(
  deps: ConsequenceDeps,
  state: TaskState,
  step: StepRecord,
  kind: TimerRecord['kind'],
  availableAt: Date,
  now: Date,
  payload: Record<string, unknown> = {},
): TimerRecord {
  return {
    id: deps.ids.newId(),
    kind,
    taskId: state.task.id,
    stepId: step.id,
    payload: { stepKey: step.key, attempt: step.attempt, ...payload },
    availableAt,
    createdAt: now,
  };
}

/** The step as the timer or request found it: the current attempt, still running, still this kind's. */
export const stillWaiting = (step: StepRecord | undefined, kind: WaitingFor['kind']): step is StepRecord =>
  !!step?.current && step.status === 'RUNNING' && !step.attemptId && step.waitingFor?.kind === kind;

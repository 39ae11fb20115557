/**
 * The sleep step: a durable timer. It waits for `durationMs` from its start, or until the ISO time its
 * `until` reference reads (`$.input.notBefore`); a time already past ends it at once. The wait is a timer
 * row (SLEEP_DUE), so a restart, or another replica, picks it up where it was; on the Temporal engine it
 * is a Temporal timer instead (docs/temporal.md).
 */
import type { StepDefinition } from '@tdp/protocol';
import type { StepRecord, TaskState } from '../../facts/records.ts';
import type { FactSession } from '../../facts/session.ts';
import { resolveInput } from '../advance.ts';
import { type ConsequenceDeps, failStepAttempt } from '../consequences.ts';
import { drivenByEngine, stepOutputs } from '../transitionRecords.ts';
import { completePlatformStep, stepTimer, stillWaiting, waitOnStep } from './finishStep.ts';

/** When the sleep ends: from its duration, or the time its reference reads (null: not a time). */
export function sleepUntil(
  definition: StepDefinition,
  state: TaskState,
  startedAt: Date,
): { ok: true; until: Date } | { ok: false; message: string } {
  const sleep = definition.sleep!;
  if (sleep.durationMs !== undefined)
    return { ok: true, until: new Date(startedAt.getTime() + sleep.durationMs) };
  const read = resolveInput(
    { ...definition, inputMapping: { until: sleep.until } },
    state.task.input,
    stepOutputs(state),
  );
  if (!read.ok) return { ok: false, message: read.message };
  const value = read.value.until;
  const time = typeof value === 'string' || typeof value === 'number' ? new Date(value) : null;
  if (!time || Number.isNaN(time.getTime()))
    return {
      ok: false,
      message: `step ${definition.key}: ${sleep.until} is not a time (${JSON.stringify(value)})`,
    };
  return { ok: true, until: time };
}

export async function beginSleep(
  deps: ConsequenceDeps,
  session: FactSession,
  before: TaskState,
  step: StepRecord,
  definition: StepDefinition,
): Promise<void> {
  const now = session.now;
  const until = sleepUntil(definition, before, step.startedAt ?? now);
  if (!until.ok) {
    await failStepAttempt(deps, session, before, step, {
      producer: 'tdp:timer',
      error: {
        category: 'INPUT',
        code: 'INPUT_MAPPING_FAILED',
        retryable: false,
        userMessage: until.message,
      },
      infrastructure: false,
      workerId: null,
      milestone: 'INPUT_INVALID',
    });
    return;
  }
  if (until.until.getTime() <= now.getTime()) {
    await sleptUntil(deps, session, before, step, until.until);
    return;
  }
  await waitOnStep(
    deps,
    session,
    before,
    step,
    { kind: 'sleep', until: until.until.toISOString(), since: now.toISOString() },
    {
      producer: 'tdp:timer',
      milestone: 'SLEEPING',
      message: `step ${step.key} sleeps until ${until.until.toISOString()}`,
      // An engine-driven execution sleeps on the engine's timer (Temporal's), which wakes it through
      // `wakeSleepingStep`; the SLEEP_DUE row is the native engine's timer.
      timers: drivenByEngine(before) ? [] : [stepTimer(deps, before, step, 'SLEEP_DUE', until.until, now)],
    },
  );
}

/** SLEEP_DUE: the step's time has come (nothing, if it has moved on). */
export async function sleepDue(
  deps: ConsequenceDeps,
  session: FactSession,
  before: TaskState,
  step: StepRecord | undefined,
): Promise<void> {
  if (!stillWaiting(step, 'sleep') || step.waitingFor?.kind !== 'sleep') return;
  await sleptUntil(deps, session, before, step, new Date(step.waitingFor.until));
}

function sleptUntil(
  deps: ConsequenceDeps,
  session: FactSession,
  before: TaskState,
  step: StepRecord,
  until: Date,
) {
  return completePlatformStep(
    deps,
    session,
    before,
    step,
    { sleptUntil: until.toISOString() },
    {
      producer: 'tdp:timer',
      milestone: 'WOKE',
      message: `step ${step.key} slept until ${until.toISOString()}`,
    },
  );
}

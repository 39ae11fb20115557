/**
 * Rerun from a step: which steps of a finished execution run again and which keep their output. Pure;
 * `retryTask` applies the plan in the retry's own fact transaction.
 * - rerun: the named step and everything downstream of it in the DAG (transitively).
 * - reused: every other step; it must have succeeded in the earlier execution, its output is copied.
 */
import type { StepDefinition } from '@tdp/protocol';
import type { StepRecord } from '../facts/records.ts';
import { type Refusal, refuse } from '../facts/stateMachine.ts';

export interface EarlierStep {
  key: string;
  status: string;
  output: unknown;
  dataSchema: string | null;
  /** The execution that produced the output (earlier than the last one when it was reused there too). */
  producedIn: string;
}

/** The current step rows of the execution that ended, as `planRerun` reads them. */
export const earlierSteps = (steps: StepRecord[], executionId: string): EarlierStep[] =>
  steps
    .filter((s) => s.current)
    .map((s) => ({
      key: s.key,
      status: s.status,
      output: s.stateData,
      dataSchema: s.dataSchema,
      producedIn: s.reusedFromExecutionId ?? executionId,
    }));

/** A fresh step row of the new execution that does not run: SUCCEEDED at once with the earlier output. */
export const reusedStep = (fresh: StepRecord, earlier: EarlierStep, at: Date): StepRecord => ({
  ...fresh,
  status: 'SUCCEEDED',
  stateData: earlier.output,
  dataSchema: earlier.dataSchema,
  finishedAt: at,
  reusedFromExecutionId: earlier.producedIn,
});

export interface RerunPlan {
  rerun: Set<string>;
  /** Step key → the earlier step whose output it reuses. */
  reused: Map<string, EarlierStep>;
}

/** The named step and every step that depends on it, directly or through others. */
export function downstreamOf(steps: StepDefinition[], fromStep: string): Set<string> {
  const reached = new Set([fromStep]);
  let grew = true;
  while (grew) {
    grew = false;
    for (const step of steps) {
      if (!reached.has(step.key) && step.dependsOn.some((d) => reached.has(d))) {
        reached.add(step.key);
        grew = true;
      }
    }
  }
  return reached;
}

/** The plan, or why there is none: an unknown step, or a step to reuse that has no output. */
export function planRerun(
  steps: StepDefinition[],
  earlier: EarlierStep[],
  fromStep: string,
): RerunPlan | Refusal {
  if (!steps.some((s) => s.key === fromStep))
    return refuse(
      'RERUN_STEP_UNKNOWN',
      `fromStep "${fromStep}" is not a step of this workflow (its steps: ${steps.map((s) => s.key).join(', ')})`,
    );
  const rerun = downstreamOf(steps, fromStep);
  const reused = new Map<string, EarlierStep>();
  for (const step of steps) {
    if (rerun.has(step.key)) continue;
    const before = earlier.find((e) => e.key === step.key);
    if (before?.status !== 'SUCCEEDED')
      return refuse(
        'RERUN_OUTPUT_MISSING',
        `step ${step.key} did not succeed in the earlier execution (${before?.status ?? 'never created'}), so there is no output to reuse; rerun from ${step.key} or earlier`,
      );
    reused.set(step.key, before);
  }
  return { rerun, reused };
}

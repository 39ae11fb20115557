/**
 * The two calls of an engine that drives an execution from outside TDP (the Temporal workflow,
 * docs/temporal.md). It reads the execution — its frozen steps and the current step states — decides
 * with the same `advance` TDP runs natively, and hands the transitions back. They are applied here as
 * TDP's own fact (ORCHESTRATION_DECIDED), in one transaction with the task locked: TDP stays the only
 * writer of facts, and scheduling, attempts, leases and callbacks are the native ones.
 */
import type { StepDefinition } from '@tdp/protocol';
import { isTerminal } from '../facts/execution.ts';
import type { TaskState } from '../facts/records.ts';
import { inFactTransaction } from '../facts/session.ts';
import { taskAfterStepChange } from '../facts/stateMachine.ts';
import type { OrchestrationFact, StepState, Transition } from './advance.ts';
import { type FactConsequenceDeps, finishTask } from './consequences.ts';
import { sleepDue } from './kinds/sleep.ts';
import { applyTransitions, stepStates } from './transitionRecords.ts';

export const temporalProducer = 'tdp:temporal';

export interface EngineView {
  /** The version the engine decides on; its decision is applied only while the task is still there. */
  taskVersion: string;
  /** Finished, superseded by a retry's execution, or gone: the engine has nothing more to decide. */
  over: boolean;
  /** Being cancelled: TDP stops the attempts itself; the engine decides nothing more. */
  canceling: boolean;
  steps: StepDefinition[];
  states: StepState[];
  /** The fact each finished current step stands for, as `advance` takes it (keyed by step key). */
  finished: Record<string, { attempt: number; fact: OrchestrationFact }>;
  /** Sleep steps under way and when they wake (a workflow adopting the execution sets their timers). */
  sleeping?: { stepKey: string; attempt: number; until: string }[];
}

export async function readForEngine(
  deps: FactConsequenceDeps,
  taskId: string,
  executionId: string,
): Promise<EngineView> {
  return inFactTransaction(deps, async (session) => viewOf(await session.lockTask(taskId), executionId));
}

export function viewOf(state: TaskState | null, executionId: string): EngineView {
  if (!state || state.execution.id !== executionId)
    return { taskVersion: '0', over: true, canceling: false, steps: [], states: [], finished: {} };
  const finished: EngineView['finished'] = {};
  const sleeping: NonNullable<EngineView['sleeping']> = [];
  for (const step of state.steps) {
    if (!step.current) continue;
    if (step.status === 'RUNNING' && step.waitingFor?.kind === 'sleep')
      sleeping.push({ stepKey: step.key, attempt: step.attempt, until: step.waitingFor.until });
    if (step.status === 'SUCCEEDED')
      finished[step.key] = { attempt: step.attempt, fact: { kind: 'STEP_SUCCEEDED', stepKey: step.key } };
    if (step.status === 'FAILED')
      finished[step.key] = {
        attempt: step.attempt,
        fact: {
          kind: 'STEP_FAILED',
          stepKey: step.key,
          errorCode: step.error?.code ?? 'STEP_FAILED',
          retryable: step.error?.retryable ?? false,
          // A lost worker or an attempt handed back (category WORKER), as the native path reads it.
          infrastructure: step.error?.category === 'WORKER',
        },
      };
  }
  return {
    taskVersion: state.task.version.toString(),
    over: isTerminal(state.execution.status),
    canceling: state.execution.status === 'CANCELLING',
    steps: state.execution.snapshot.steps,
    states: stepStates(state),
    finished,
    sleeping,
  };
}

export interface EngineDecision {
  taskId: string;
  executionId: string;
  /** The decision's fact id: an activity run again after its commit finds it and writes nothing. */
  decisionId: string;
  /** The task version it was decided on: a task that moved since is read and decided again. */
  basedOnVersion: string;
  transitions: Transition[];
}

export type DecisionOutcome = 'APPLIED' | 'ALREADY_APPLIED' | 'STALE' | 'OVER';

export async function applyEngineDecision(
  deps: FactConsequenceDeps,
  decision: EngineDecision,
): Promise<{ outcome: DecisionOutcome; ended: boolean }> {
  return inFactTransaction(deps, async (session) => {
    const before = await session.lockTask(decision.taskId);
    // Looked up under the task's lock: a second run of the same activity waits for the first's commit.
    const view = viewOf(before, decision.executionId);
    if (await session.findDedup(decision.decisionId)) return { outcome: 'ALREADY_APPLIED', ended: view.over };
    if (!before || view.over || view.canceling) return { outcome: 'OVER', ended: view.over };
    if (view.taskVersion !== decision.basedOnVersion) return { outcome: 'STALE', ended: false };
    if (decision.transitions.length === 0) return { outcome: 'APPLIED', ended: false };
    const at = session.now;
    const orchestrated = applyTransitions(deps.ids, before, decision.transitions, at);
    const moved = taskAfterStepChange(before.task, before.execution, orchestrated.state.steps, undefined, at);
    const after: TaskState = {
      task: moved.task,
      execution: moved.execution,
      steps: orchestrated.state.steps,
    };
    await session.commit(
      before,
      after,
      {
        id: decision.decisionId,
        type: 'ORCHESTRATION_DECIDED',
        producer: temporalProducer,
        payload: {
          engine: 'temporal',
          workflowId: decision.executionId,
          transitions: decision.transitions.map((t) => ('stepKey' in t ? `${t.kind} ${t.stepKey}` : t.kind)),
        },
        occurredAt: at,
        receivedAt: at,
      },
      {
        dedupHash: decision.decisionId,
        write: {
          task: after.task,
          ...(after.execution !== before.execution ? { execution: after.execution } : {}),
          steps: orchestrated.changedSteps,
          ...orchestrated.write,
          newSteps: orchestrated.write.newSteps ?? [],
        },
      },
    );
    if (orchestrated.end) await finishTask(deps, session, after, orchestrated.end);
    return { outcome: 'APPLIED', ended: orchestrated.end !== null };
  });
}

export interface SleepingStep {
  taskId: string;
  executionId: string;
  stepKey: string;
  attempt: number;
}

/**
 * The engine's timer for a sleep step fired: the step wakes (STEP_COMPLETED), as SLEEP_DUE wakes it
 * natively. Nothing, if the step has moved on or woke already (an activity run again).
 */
export async function wakeSleepingStep(deps: FactConsequenceDeps, sleeping: SleepingStep): Promise<void> {
  await inFactTransaction(deps, async (session) => {
    const before = await session.lockTask(sleeping.taskId);
    if (!before || before.execution.id !== sleeping.executionId || isTerminal(before.execution.status))
      return;
    if (before.execution.status === 'CANCELLING') return;
    const step = before.steps.find((s) => s.current && s.key === sleeping.stepKey);
    if (step?.attempt !== sleeping.attempt) return;
    await sleepDue(deps, session, before, step);
  });
}

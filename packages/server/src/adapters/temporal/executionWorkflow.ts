/**
 * The Temporal workflow that drives one TDP execution (docs/temporal.md); its workflow id is the
 * execution id. Deterministic: it decides with TDP's own `advance` over what the `readExecution`
 * activity returned (recorded in the workflow's history), and hands each decision to `applyDecision`,
 * which commits it as TDP's fact. Step ends arrive as `stepFinished` signals (the bridge sends them from
 * the STEP_COMPLETED and STEP_FAILED events on JetStream); retry back-offs and sleep steps are Temporal
 * timers (a sleep step's begin arrives as `stepSleeping`, from its STEP_WAITING event).
 * Only modules without I/O may be imported here: the file is bundled for Temporal's workflow sandbox.
 */
import {
  condition,
  defineSignal,
  patched,
  proxyLocalActivities,
  setHandler,
  sleep,
  uuid4,
} from '@temporalio/workflow';
import { advance, type OrchestrationFact } from '../../core/orchestration/advance.ts';
import type { EngineView } from '../../core/orchestration/engineDecisions.ts';
import type { EngineActivities } from './activities.ts';

export interface ExecutionInput {
  taskId: string;
  executionId: string;
}

export interface StepFinished {
  stepKey: string;
  attempt: number;
}

export const stepFinished = defineSignal<[StepFinished]>('stepFinished');

/** A sleep step began: TDP computed when it wakes (`until`, ISO); the workflow's timer wakes it. */
export interface StepSleeping extends StepFinished {
  until: string;
}

export const stepSleeping = defineSignal<[StepSleeping]>('stepSleeping');

type Trigger =
  | { kind: 'started' }
  | { kind: 'finished'; stepKey: string; attempt: number }
  | { kind: 'retryDue'; stepKey: string; attempt: number }
  | { kind: 'sleepDue'; stepKey: string; attempt: number };

// Local activities: both are one short transaction in TDP, run by this worker inside the workflow task
// (their results are recorded in the history all the same), without the server scheduling an activity
// task for each: half the Temporal server's CPU per execution (the e2e bench, 92 -> 43 ms a job).
const { readExecution, applyDecision, wakeStep } = proxyLocalActivities<EngineActivities>({
  startToCloseTimeout: '30 seconds',
  // TDP's database may be away for a while: the activity is retried until it answers.
  retry: { initialInterval: '500 milliseconds', backoffCoefficient: 2, maximumInterval: '30 seconds' },
});

/** The fact a trigger stands for now, or null when it no longer applies (a later attempt runs). */
function factOf(trigger: Exclude<Trigger, { kind: 'sleepDue' }>, view: EngineView): OrchestrationFact | null {
  if (trigger.kind === 'started') return { kind: 'EXECUTION_STARTED' };
  if (trigger.kind === 'retryDue') {
    const state = view.states.find((s) => s.key === trigger.stepKey);
    return state?.status === 'WAITING' && state.attempt === trigger.attempt
      ? { kind: 'RETRY_DUE', stepKey: trigger.stepKey }
      : null;
  }
  const finished = view.finished[trigger.stepKey];
  return finished?.attempt === trigger.attempt ? finished.fact : null;
}

/** The patch id of adopting an execution under way (`patched`: old histories replay without it). */
export const adoptPatch = 'adopt-execution-under-way';

/** A retry whose back-off the lost run was waiting out (its due time was in that run's timer). */
const retriesWaiting = (view: EngineView) =>
  view.states.filter((s) => s.status === 'WAITING' && s.attempt > 1);

/** Something has happened to the execution already: a step finished, one sleeps, or a retry waits. */
const adopts = (view: EngineView) =>
  Object.keys(view.finished).length > 0 ||
  (view.sleeping ?? []).length > 0 ||
  retriesWaiting(view).length > 0;

export async function tdpExecution(input: ExecutionInput): Promise<'ENDED' | 'OVER'> {
  const triggers: Trigger[] = [{ kind: 'started' }];
  const seen = new Set<string>();
  setHandler(stepFinished, ({ stepKey, attempt }) => {
    // A redelivered event signals again: the first signal of a step's attempt is the one that counts.
    const key = `${stepKey}#${attempt}`;
    if (seen.has(key)) return;
    seen.add(key);
    triggers.push({ kind: 'finished', stepKey, attempt });
  });
  const sleeping = new Set<string>();
  const sleepUntil = ({ stepKey, attempt, until }: StepSleeping) => {
    const key = `${stepKey}#${attempt}`;
    if (sleeping.has(key)) return;
    sleeping.add(key);
    // Workflow time (Date.now() here is the workflow task's time, the same in every replay).
    void sleep(Math.max(0, Date.parse(until) - Date.now())).then(() =>
      triggers.push({ kind: 'sleepDue', stepKey, attempt }),
    );
  };
  setHandler(stepSleeping, sleepUntil);
  for (;;) {
    await condition(() => triggers.length > 0);
    let trigger = triggers.shift()!;
    if (trigger.kind === 'sleepDue') {
      // The wake commits the step's STEP_COMPLETED; its signal is then one this workflow has had.
      seen.add(`${trigger.stepKey}#${trigger.attempt}`);
      await wakeStep({ ...input, stepKey: trigger.stepKey, attempt: trigger.attempt });
      trigger = { kind: 'finished', stepKey: trigger.stepKey, attempt: trigger.attempt };
    }
    for (;;) {
      const view = await readExecution(input.taskId, input.executionId);
      if (view.over || view.canceling) return 'OVER';
      // A run started on an execution under way (the sweep, after Temporal lost the first run) adopts
      // it: the steps that finished meanwhile are decided first, in place of the start, the sleeps under
      // way get their timers, the retries waiting are made. Behind a patch: a run of the code before it
      // replays as it ran.
      if (trigger.kind === 'started' && adopts(view) && patched(adoptPatch)) {
        for (const [stepKey, { attempt }] of Object.entries(view.finished)) {
          seen.add(`${stepKey}#${attempt}`);
          triggers.push({ kind: 'finished', stepKey, attempt });
        }
        for (const asleep of view.sleeping ?? []) sleepUntil(asleep);
        // Its back-off is not known any more: the retry is made now, early rather than never.
        for (const retry of retriesWaiting(view))
          triggers.push({ kind: 'retryDue', stepKey: retry.key, attempt: retry.attempt });
        break;
      }
      const fact = factOf(trigger, view);
      if (!fact) break;
      const transitions = advance(view.steps, view.states, fact);
      const { outcome, ended } = await applyDecision({
        taskId: input.taskId,
        executionId: input.executionId,
        decisionId: uuid4(),
        basedOnVersion: view.taskVersion,
        transitions,
      });
      if (ended) return 'ENDED';
      if (outcome === 'OVER') return 'OVER';
      // The task moved between the read and the decision: read it again and decide anew.
      if (outcome === 'STALE') continue;
      for (const t of transitions)
        if (t.kind === 'RETRY_SCHEDULED')
          void sleep(t.delayMs).then(() =>
            triggers.push({ kind: 'retryDue', stepKey: t.stepKey, attempt: t.attempt }),
          );
      break;
    }
  }
}

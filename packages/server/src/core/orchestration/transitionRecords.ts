/**
 * TDP as the coordinator of tasks created through POST /v1/tasks: after each fact, `advance` decides
 * what follows and this module turns its transitions into records of the same transaction — steps made
 * ready (with scheduling requests), skipped or cancelled (with cancel commands), retries (a new attempt
 * and a timer), callbacks with the execution's next sequence number, and timeline milestones.
 */
import { type StepDefinition, stepKind } from '@tdp/protocol';
import { newSchedulingRequest, newStepRecord } from '../facts/newRecords.ts';
import type {
  CallbackRecord,
  SchedulingRequestRecord,
  StepRecord,
  TaskState,
  TimelineRecord,
  TimerRecord,
  WorkerCommandRecord,
} from '../facts/records.ts';
import { shownUserMessage } from '../facts/views.ts';
import type { FactWriteSet } from '../facts/writeSet.ts';
import type { IdGenerator } from '../shared/ports.ts';
import {
  advance,
  missingInputMessage,
  type OrchestrationFact,
  type ResolvedInput,
  resolveInput,
  type StepState,
  type Transition,
} from './advance.ts';

/** TDP's own workers report the steps of tasks created here (issue: the worker gateway). */
export const platformWorkerProducer = 'tdp:worker';

export type OrchestrationWrite = Pick<
  FactWriteSet,
  | 'schedulingRequests'
  | 'closeSchedulingRequests'
  | 'timers'
  | 'timeline'
  | 'workerCommands'
  | 'revokeAttemptIds'
  | 'newSteps'
  | 'closeMapItems'
>;

export interface Orchestrated {
  state: TaskState;
  /** Step rows changed by orchestration (besides those the fact changed itself). */
  changedSteps: StepRecord[];
  write: OrchestrationWrite;
  /** The execution is over: the caller records the coordinator's end of the task. */
  end:
    | { outcome: 'SUCCEEDED'; degraded: boolean }
    | {
        outcome: 'FAILED';
        stepKey: string;
        errorCode: string;
        /** The steps this end cancelled, as they were: those still on a worker are told to stop. */
        cancelled: StepRecord[];
      }
    | null;
}

export const isPlatformTask = (state: TaskState) => state.task.workflowDefinitionId !== null;

export function milestone(
  ids: IdGenerator,
  state: TaskState,
  kind: string,
  message: string,
  data: Record<string, unknown>,
  at: Date,
): TimelineRecord {
  return { id: ids.newId(), taskId: state.task.id, executionId: state.execution.id, kind, message, data, at };
}

/** Outputs of succeeded steps, for input mapping. */
export function stepOutputs(state: TaskState): Record<string, unknown> {
  return Object.fromEntries(
    state.steps.filter((s) => s.current && s.status === 'SUCCEEDED').map((s) => [s.key, s.stateData]),
  );
}

export function orchestrate(
  ids: IdGenerator,
  state: TaskState,
  fact: OrchestrationFact,
  at: Date,
): Orchestrated {
  // An execution another engine drives gets its decisions from that engine, later (engineDecisions.ts).
  const transitions = drivenByEngine(state)
    ? []
    : advance(state.execution.snapshot.steps, stepStates(state), fact);
  return applyTransitions(ids, state, transitions, at);
}

/** An execution whose next steps a Temporal workflow decides, not the fact's own transaction. */
export const drivenByEngine = (state: TaskState) => state.execution.snapshot.engine === 'temporal';

/** The current step states, as `advance` reads them. */
export const stepStates = (state: TaskState): StepState[] =>
  state.steps.filter((s) => s.current).map((s) => ({ key: s.key, status: s.status, attempt: s.attempt }));

/** Turns transitions into the records of the transaction they are applied in. */
export function applyTransitions(
  ids: IdGenerator,
  state: TaskState,
  transitions: Transition[],
  at: Date,
): Orchestrated {
  const definitions: StepDefinition[] = state.execution.snapshot.steps;
  let steps = [...state.steps];
  const changed = new Map<string, StepRecord>();
  const write: Required<
    Pick<
      OrchestrationWrite,
      'schedulingRequests' | 'timers' | 'timeline' | 'workerCommands' | 'revokeAttemptIds' | 'newSteps'
    >
  > &
    OrchestrationWrite = {
    schedulingRequests: [] as SchedulingRequestRecord[],
    timers: [] as TimerRecord[],
    timeline: [] as TimelineRecord[],
    workerCommands: [] as WorkerCommandRecord[],
    revokeAttemptIds: [] as string[],
    newSteps: [] as StepRecord[],
  };
  const cancelled: string[] = [];
  const cancelledAsWere: StepRecord[] = [];
  const mapsClosed: string[] = [];
  let end: Orchestrated['end'] = null;
  const update = (step: StepRecord, patch: Partial<StepRecord>) => {
    const next = { ...step, ...patch, version: step.version + 1n, updatedAt: at };
    steps = steps.map((s) => (s.id === step.id ? next : s));
    changed.set(next.id, next);
    return next;
  };
  const currentStep = (key: string) => steps.find((s) => s.key === key && s.current)!;

  for (const t of transitions) {
    switch (t.kind) {
      case 'STEP_READY': {
        const definition = definitions.find((d) => d.key === t.stepKey);
        // A delayed step's first attempt waits; retries have their own back-off.
        const delayMs = t.attempt === 1 ? (definition?.startDelayMs ?? 0) : 0;
        const placeableAt = new Date(at.getTime() + delayMs);
        if (definition && stepKind(definition) !== 'capability') {
          // The platform runs this step itself: it begins through its timer (kinds/begin.ts), where the
          // kind's own reads (a signal already sent, a child workflow, the map's items) can be made.
          const step = update(currentStep(t.stepKey), { status: 'RUNNING', startedAt: at });
          write.timers.push({
            id: ids.newId(),
            kind: 'STEP_BEGIN',
            taskId: state.task.id,
            stepId: step.id,
            payload: { stepKey: t.stepKey, attempt: t.attempt },
            availableAt: placeableAt,
            createdAt: at,
          });
          write.timeline.push(
            milestone(
              ids,
              state,
              'STEP_READY',
              `step ${t.stepKey} (${stepKind(definition)}) begins (attempt ${t.attempt})`,
              { stepId: t.stepKey, attempt: t.attempt, kind: stepKind(definition) },
              at,
            ),
          );
          break;
        }
        const step = update(currentStep(t.stepKey), { status: 'READY' });
        write.schedulingRequests.push(newSchedulingRequest(ids, state, step.id, placeableAt, at));
        const limit = definition?.timeouts.scheduleToStartMs;
        if (limit) {
          write.timers.push({
            id: ids.newId(),
            kind: 'SCHEDULE_TO_START',
            taskId: state.task.id,
            stepId: step.id,
            payload: { limitMs: limit },
            availableAt: new Date(placeableAt.getTime() + limit),
            createdAt: at,
          });
        }
        write.timeline.push(
          milestone(
            ids,
            state,
            'STEP_READY',
            delayMs > 0
              ? `step ${t.stepKey} is ready (attempt ${t.attempt}); placed after its ${delayMs} ms delay`
              : `step ${t.stepKey} is ready (attempt ${t.attempt})`,
            { stepId: t.stepKey, attempt: t.attempt, ...(delayMs > 0 ? { delayMs, placeableAt } : {}) },
            at,
          ),
        );
        break;
      }
      case 'STEP_SKIPPED':
        update(currentStep(t.stepKey), { status: 'SKIPPED', finishedAt: at });
        write.timeline.push(
          milestone(
            ids,
            state,
            'STEP_SKIPPED',
            `step ${t.stepKey} skipped: ${t.reason}`,
            { stepId: t.stepKey },
            at,
          ),
        );
        break;
      case 'STEP_CANCELLED': {
        const step = currentStep(t.stepKey);
        update(step, { status: 'CANCELLED', finishedAt: at, waitingFor: null });
        cancelled.push(step.id);
        cancelledAsWere.push(step);
        if (step.attemptId) write.revokeAttemptIds.push(step.attemptId);
        // A running map's items are cancelled with it, and their attempts revoked.
        if (step.waitingFor?.kind === 'map') mapsClosed.push(step.id);
        break;
      }
      case 'RETRY_SCHEDULED': {
        const failed = currentStep(t.stepKey);
        update(failed, { current: false });
        const retry: StepRecord = {
          ...newStepRecord(
            ids,
            state.task.id,
            state.execution.id,
            { ...failed, expectedProducer: failed.expectedProducer },
            at,
          ),
          attempt: t.attempt,
          clientStepKey: failed.clientStepKey,
          capability: failed.capability,
          capabilityVersion: failed.capabilityVersion,
        };
        steps.push(retry);
        write.newSteps.push(retry);
        // An engine waits out the back-off with a timer of its own.
        if (!drivenByEngine(state))
          write.timers.push({
            id: ids.newId(),
            kind: 'RETRY_DUE',
            taskId: state.task.id,
            stepId: retry.id,
            payload: { stepKey: t.stepKey, attempt: t.attempt },
            availableAt: new Date(at.getTime() + t.delayMs),
            createdAt: at,
          });
        write.timeline.push(
          milestone(
            ids,
            state,
            'RETRY_SCHEDULED',
            `step ${t.stepKey} attempt ${t.attempt} in ${t.delayMs} ms: ${t.reason}`,
            { stepId: t.stepKey, attempt: t.attempt, delayMs: t.delayMs, reason: t.reason },
            at,
          ),
        );
        break;
      }
      case 'EXECUTION_SUCCEEDED':
        end = { outcome: 'SUCCEEDED', degraded: t.degraded };
        break;
      case 'EXECUTION_FAILED':
        end = { outcome: 'FAILED', stepKey: t.stepKey, errorCode: t.errorCode, cancelled: cancelledAsWere };
        break;
      default: {
        const unreachable: never = t;
        throw new Error(`unknown transition ${JSON.stringify(unreachable)}`);
      }
    }
  }
  return {
    state: { ...state, steps },
    changedSteps: [...changed.values()].filter((s) => !write.newSteps.some((n) => n.id === s.id)),
    write: {
      ...write,
      ...(cancelled.length > 0
        ? { closeSchedulingRequests: { stepIds: cancelled, status: 'CANCELLED' as const } }
        : {}),
      ...(mapsClosed.length > 0 ? { closeMapItems: { stepIds: mapsClosed, at } } : {}),
    },
    end,
  };
}

/** A callback for an execution event: the execution's next sequence number, the signed body's content. */
export function callbackFor(
  ids: IdGenerator,
  state: TaskState,
  eventId: string,
  eventType: string,
  at: Date,
): { callback: CallbackRecord | null; state: TaskState } {
  const { task, execution } = state;
  if (!task.callbackUrl) return { callback: null, state };
  const sequence = execution.callbackSequence + 1;
  const next = { ...state, execution: { ...execution, callbackSequence: sequence } };
  const outputs = execution.status === 'SUCCEEDED' ? stepOutputs(state) : null;
  return {
    state: next,
    callback: {
      id: ids.newId(),
      applicationId: task.applicationId,
      taskId: task.id,
      executionId: execution.id,
      sequence,
      eventId,
      eventType,
      url: task.callbackUrl,
      payload: {
        // 1.1: cancelled is spelt CANCELLED / execution.cancelled (1.0 said CANCELED / execution.canceled).
        specVersion: '1.1',
        eventId,
        type: eventType,
        sequence,
        applicationId: task.applicationId,
        taskId: task.id,
        executionId: execution.id,
        externalRef: task.externalRef,
        status: execution.status,
        progress: execution.progress,
        data: {
          lifecycleStatus: task.lifecycleStatus,
          failure: task.failure
            ? { code: task.failure.code, userMessage: shownUserMessage(task.failure) }
            : null,
          outputs,
        },
        occurredAt: at.toISOString(),
      },
      createdAt: at,
    },
  };
}

/** The input of a platform step from the task input and the outputs of the steps it depends on. */
export function resolvePlatformInput(state: TaskState, step: StepRecord): ResolvedInput {
  const definition = state.execution.snapshot.steps.find((d) => d.key === step.key);
  if (!definition)
    return {
      ok: false,
      code: 'INPUT_MAPPING_MISSING',
      message: missingInputMessage,
      detail: `step ${step.key} is not in the snapshot`,
    };
  const outputs = stepOutputs(state);
  // Upstream outputs are stored as the step's data (`tdp.output.v1`): the value itself.
  return resolveInput(definition, state.task.input, outputs);
}

/** The step rows to write: the fact's own step (as orchestration left it) and every other changed one. */
export function stepsToWrite(factStep: StepRecord, orchestrated: Orchestrated | null): StepRecord[] {
  if (!orchestrated) return [factStep];
  const own = orchestrated.changedSteps.find((s) => s.id === factStep.id) ?? factStep;
  return [own, ...orchestrated.changedSteps.filter((s) => s.id !== factStep.id)];
}

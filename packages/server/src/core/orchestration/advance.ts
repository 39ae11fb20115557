/**
 * Orchestration glossary
 * - advance: given the frozen snapshot, the current step states and one fact, the transitions that
 *   follow. Pure; the use case applies them in the fact's own transaction.
 * - ready: every dependency succeeded; the step gets a scheduling request.
 * - skipped: a dependency can no longer produce its output (it was skipped, or failed and the workflow
 *   continues with a warning).
 * - failure policy: FAIL_TASK ends the execution on the first failure; RETRY_THEN_FAIL_TASK retries
 *   (back-off per the step's retry policy) and then ends it; CONTINUE_WITH_WARNING retries the same way,
 *   then lets the rest of the DAG go on and marks the task DEGRADED.
 */
import type { StepDefinition, StepStatus } from '@tdp/protocol';
// references.ts, not dag.ts: advance also runs inside the Temporal workflow's bundle, where only modules
// without I/O (and no Node built-ins) may be imported.
import { mappingEntry, parseMappingReference } from '../definitions/references.ts';

export interface StepState {
  key: string;
  status: StepStatus;
  attempt: number;
  output?: unknown;
}

export type OrchestrationFact =
  | { kind: 'EXECUTION_STARTED' }
  | { kind: 'STEP_SUCCEEDED'; stepKey: string }
  /** `infrastructure`: the attempt was lost (worker gone, lease expired), not failed by the step. */
  | { kind: 'STEP_FAILED'; stepKey: string; errorCode: string; retryable: boolean; infrastructure?: boolean }
  | { kind: 'RETRY_DUE'; stepKey: string };

export type Transition =
  | { kind: 'STEP_READY'; stepKey: string; attempt: number }
  | { kind: 'STEP_SKIPPED'; stepKey: string; reason: string }
  | { kind: 'STEP_CANCELLED'; stepKey: string }
  | { kind: 'RETRY_SCHEDULED'; stepKey: string; attempt: number; delayMs: number; reason: string }
  | { kind: 'EXECUTION_SUCCEEDED'; degraded: boolean }
  | { kind: 'EXECUTION_FAILED'; stepKey: string; errorCode: string };

const finished: ReadonlySet<StepStatus> = new Set(['SUCCEEDED', 'FAILED', 'SKIPPED', 'CANCELLED']);

/** Back-off before attempt `nextAttempt` (2, 3, …): initial × multiplier^(n−2), capped. */
export function retryDelayMs(retry: StepDefinition['retry'], nextAttempt: number): number {
  return Math.min(
    retry.maxBackoffMs,
    Math.round(retry.initialBackoffMs * retry.multiplier ** (nextAttempt - 2)),
  );
}

function mayRetry(
  step: StepDefinition,
  state: StepState,
  fact: Extract<OrchestrationFact, { kind: 'STEP_FAILED' }>,
): boolean {
  // A lost attempt is retried under every policy: the step itself never failed.
  if (fact.infrastructure) return state.attempt < step.retry.maxAttempts;
  if (step.failurePolicy === 'FAIL_TASK') return false;
  if (!fact.retryable || step.retry.nonRetryableErrorCodes.includes(fact.errorCode)) return false;
  return state.attempt < step.retry.maxAttempts;
}

/**
 * The transitions that follow `fact`. Step states are the current ones (including the change the fact
 * itself made, e.g. the failed step is FAILED). Readiness, skipping and completion are re-derived from
 * the whole DAG, so applying the result twice changes nothing.
 */
export function advance(steps: StepDefinition[], states: StepState[], fact: OrchestrationFact): Transition[] {
  const byKey = new Map(states.map((s) => [s.key, { ...s }]));
  const transitions: Transition[] = [];

  if (fact.kind === 'STEP_FAILED') {
    const step = steps.find((s) => s.key === fact.stepKey)!;
    const state = byKey.get(fact.stepKey)!;
    if (mayRetry(step, state, fact)) {
      const attempt = state.attempt + 1;
      return [
        {
          kind: 'RETRY_SCHEDULED',
          stepKey: step.key,
          attempt,
          delayMs: retryDelayMs(step.retry, attempt),
          reason: fact.errorCode,
        },
      ];
    }
    if (step.failurePolicy !== 'CONTINUE_WITH_WARNING') {
      for (const other of states) {
        if (!finished.has(other.status) && other.key !== step.key)
          transitions.push({ kind: 'STEP_CANCELLED', stepKey: other.key });
      }
      transitions.push({ kind: 'EXECUTION_FAILED', stepKey: step.key, errorCode: fact.errorCode });
      return transitions;
    }
  }
  if (fact.kind === 'RETRY_DUE') {
    const state = byKey.get(fact.stepKey);
    if (state && state.status === 'WAITING') {
      state.status = 'READY';
      transitions.push({ kind: 'STEP_READY', stepKey: state.key, attempt: state.attempt });
    }
    return transitions;
  }

  // Propagate readiness and skips until nothing changes (a skip can unlock further skips).
  let changed = true;
  while (changed) {
    changed = false;
    for (const step of steps) {
      const state = byKey.get(step.key);
      // A later attempt waits for its RETRY_DUE (the back-off), whatever else finishes meanwhile: its
      // dependencies had all succeeded when the first attempt became ready.
      if (state?.status !== 'WAITING' || state.attempt > 1) continue;
      const dependencies = step.dependsOn.map((d) => byKey.get(d)!);
      const blocked = dependencies.find(
        (d) => d.status === 'SKIPPED' || d.status === 'FAILED' || d.status === 'CANCELLED',
      );
      if (blocked) {
        state.status = 'SKIPPED';
        transitions.push({
          kind: 'STEP_SKIPPED',
          stepKey: step.key,
          reason: `${blocked.key} ${blocked.status.toLowerCase()}`,
        });
        changed = true;
      } else if (dependencies.every((d) => d.status === 'SUCCEEDED')) {
        state.status = 'READY';
        transitions.push({ kind: 'STEP_READY', stepKey: step.key, attempt: state.attempt });
        changed = true;
      }
    }
  }
  const all = [...byKey.values()];
  if (all.every((s) => finished.has(s.status))) {
    transitions.push({
      kind: 'EXECUTION_SUCCEEDED',
      degraded: all.some((s) => s.status === 'FAILED' || s.status === 'SKIPPED'),
    });
  }
  return transitions;
}

/**
 * A mapping that could not be resolved. `message` is for the person who submitted the work (no paths);
 * `detail`, for the developer, names the step, the field and the reference (stored with the failure).
 */
export type ResolvedInput =
  | { ok: true; value: Record<string, unknown> }
  | { ok: false; code: 'INPUT_MAPPING_MISSING'; message: string; detail: string };

/** The step failure of an input that could not be resolved: not retryable, the same input fails again. */
export function inputFailure(input: Extract<ResolvedInput, { ok: false }>) {
  return {
    category: 'INPUT' as const,
    code: input.code,
    retryable: false,
    userMessage: input.message,
    detail: input.detail,
  };
}

/** What a person is shown when a step's input lacks a value it needs. */
export const missingInputMessage =
  'This step could not start because a value it needs is missing from the work’s input. Contact the application’s support.';

function pick(value: unknown, path: string[]): { found: boolean; value?: unknown } {
  let current = value;
  for (const part of path) {
    if (current === null || typeof current !== 'object' || !(part in (current as Record<string, unknown>)))
      return { found: false };
    current = (current as Record<string, unknown>)[part];
  }
  return { found: true, value: current };
}

/**
 * A step's input from its mapping: `$.input…` from the task input, `$.steps.<key>.output…` from upstream.
 * An absent value fails a required entry, is left out for an optional one, and is the default for one
 * that has it (`mappingEntry`).
 */
export function resolveInput(
  step: StepDefinition,
  taskInput: unknown,
  outputs: Record<string, unknown>,
): ResolvedInput {
  const value: Record<string, unknown> = {};
  for (const [field, raw] of Object.entries(step.inputMapping)) {
    const entry = mappingEntry(raw);
    if (entry.kind === 'literal') {
      value[field] = entry.value;
      continue;
    }
    const source = parseMappingReference(entry.from);
    const failed = (detail: string): ResolvedInput => ({
      ok: false,
      code: 'INPUT_MAPPING_MISSING',
      message: missingInputMessage,
      detail,
    });
    if (source === 'invalid' || source === null)
      return failed(`step ${step.key}: ${entry.from} for "${field}" is not a valid reference`);
    const from = source.kind === 'input' ? taskInput : outputs[source.stepKey];
    const found = pick(from, source.path);
    if (found.found) value[field] = found.value;
    else if (typeof entry.whenAbsent === 'object') value[field] = entry.whenAbsent.default;
    else if (entry.whenAbsent === 'fail')
      return failed(`step ${step.key} needs ${entry.from} for "${field}", and it is missing`);
  }
  return { ok: true, value };
}

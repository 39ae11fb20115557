/**
 * Workflow definition rules, checked once at publish time so that every task runs a sound DAG:
 * unique step keys, dependencies that exist, no cycles, and input mappings that read only the task input
 * or steps upstream of the reader. Pure: no I/O.
 */
import type { FieldError, PublishWorkflowDefinitionRequest, StepDefinition } from '@tdp/protocol';
import { checkMapping } from './references.ts';
import { normaliseKind, validateStepKind } from './stepKinds.ts';

export { type MappingSource, parseMappingReference, upstreamOf } from './references.ts';

type StepInput = PublishWorkflowDefinitionRequest['steps'][number];

export const defaultRetry: StepDefinition['retry'] = {
  maxAttempts: 3,
  initialBackoffMs: 1_000,
  maxBackoffMs: 60_000,
  multiplier: 2,
  nonRetryableErrorCodes: [],
};

/** Fills every optional field so the stored definition (and each execution's snapshot) is explicit. */
export function normaliseSteps(steps: StepInput[]): StepDefinition[] {
  return steps.map((step) => ({
    key: step.key,
    ...normaliseKind(step),
    dependsOn: step.dependsOn ?? [],
    inputMapping: step.inputMapping ?? {},
    affinity: step.affinity ?? {},
    timeouts: step.timeouts ?? {},
    retry: { ...defaultRetry, ...step.retry },
    failurePolicy: step.failurePolicy ?? 'FAIL_TASK',
    startDelayMs: step.startDelayMs ?? 0,
  }));
}

/** Finds one cycle and returns it as a closed path, e.g. ['clean', 'watermark', 'clean']. */
export function findCycle(steps: Pick<StepDefinition, 'key' | 'dependsOn'>[]): string[] | null {
  const dependencies = new Map(steps.map((s) => [s.key, s.dependsOn]));
  const state = new Map<string, 'visiting' | 'done'>();
  const path: string[] = [];

  const visit = (key: string): string[] | null => {
    if (state.get(key) === 'done') return null;
    if (state.get(key) === 'visiting') return [...path.slice(path.indexOf(key)), key];
    state.set(key, 'visiting');
    path.push(key);
    for (const next of dependencies.get(key) ?? []) {
      if (!dependencies.has(next)) continue;
      const cycle = visit(next);
      if (cycle) return cycle;
    }
    path.pop();
    state.set(key, 'done');
    return null;
  };

  for (const step of steps) {
    const cycle = visit(step.key);
    if (cycle) return cycle;
  }
  return null;
}

export function validateSteps(steps: StepDefinition[]): FieldError[] {
  const errors: FieldError[] = [];
  const seen = new Map<string, number>();
  steps.forEach((step, index) => {
    const first = seen.get(step.key);
    if (first !== undefined) {
      errors.push({
        path: `/steps/${index}/key`,
        message: `step key "${step.key}" is already used by step ${first}`,
      });
    } else {
      seen.set(step.key, index);
    }
    const dependsOnSeen = new Set<string>();
    step.dependsOn.forEach((dependency, d) => {
      if (dependsOnSeen.has(dependency)) {
        errors.push({ path: `/steps/${index}/dependsOn/${d}`, message: `"${dependency}" is listed twice` });
      }
      dependsOnSeen.add(dependency);
      if (dependency === step.key) {
        errors.push({
          path: `/steps/${index}/dependsOn/${d}`,
          message: `step "${step.key}" depends on itself`,
        });
      } else if (!steps.some((s) => s.key === dependency)) {
        errors.push({
          path: `/steps/${index}/dependsOn/${d}`,
          message: `step "${step.key}" depends on "${dependency}", which is not a step of this workflow`,
        });
      }
    });
    if (step.retry.maxBackoffMs < step.retry.initialBackoffMs) {
      errors.push({
        path: `/steps/${index}/retry/maxBackoffMs`,
        message: 'maxBackoffMs must be at least initialBackoffMs',
      });
    }
  });
  if (errors.length > 0) return errors;

  const cycle = findCycle(steps);
  if (cycle) return [{ path: '/steps', message: `dependency cycle: ${cycle.join(' -> ')}` }];

  steps.forEach((step, index) => {
    errors.push(...validateStepKind(steps, step, index));
    errors.push(...checkMapping(steps, step, step.inputMapping, `/steps/${index}/inputMapping`));
  });
  return errors;
}

/**
 * Workflow definition rules, checked once at publish time so that every task runs a sound DAG:
 * unique step keys, dependencies that exist, no cycles, and input mappings that read only the task input
 * or steps upstream of the reader. Pure: no I/O.
 */
import type { FieldError, PublishWorkflowDefinitionRequest, StepDefinition } from '@tdp/protocol';

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
    capability: step.capability.trim(),
    capabilityVersion: step.capabilityVersion.trim(),
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

/** Every step that `key` depends on, directly or through other steps. Assumes no cycle. */
export function upstreamOf(steps: Pick<StepDefinition, 'key' | 'dependsOn'>[], key: string): Set<string> {
  const dependencies = new Map(steps.map((s) => [s.key, s.dependsOn]));
  const seen = new Set<string>();
  const stack = [...(dependencies.get(key) ?? [])];
  while (stack.length > 0) {
    const next = stack.pop()!;
    if (seen.has(next)) continue;
    seen.add(next);
    stack.push(...(dependencies.get(next) ?? []));
  }
  return seen;
}

export type MappingSource =
  | { kind: 'input'; path: string[] }
  | { kind: 'step'; stepKey: string; path: string[] };

/** `$.input.a.b` → input, `$.steps.clean.output.x` → step output; other values are literals (null). */
export function parseMappingReference(value: unknown): MappingSource | 'invalid' | null {
  if (typeof value !== 'string' || !value.startsWith('$.')) return null;
  const parts = value.slice(2).split('.');
  if (parts.some((p) => p.length === 0)) return 'invalid';
  if (parts[0] === 'input') return { kind: 'input', path: parts.slice(1) };
  if (parts[0] === 'steps' && parts.length >= 3 && parts[2] === 'output') {
    return { kind: 'step', stepKey: parts[1]!, path: parts.slice(3) };
  }
  return 'invalid';
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
    if (!step.capability)
      errors.push({ path: `/steps/${index}/capability`, message: 'capability is required' });
    if (!step.capabilityVersion) {
      errors.push({ path: `/steps/${index}/capabilityVersion`, message: 'capabilityVersion is required' });
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
    const upstream = upstreamOf(steps, step.key);
    for (const [field, value] of Object.entries(step.inputMapping)) {
      const source = parseMappingReference(value);
      const path = `/steps/${index}/inputMapping/${field}`;
      if (source === 'invalid') {
        errors.push({
          path,
          message: `"${String(value)}" must be $.input[.field…] or $.steps.<key>.output[.field…]`,
        });
      } else if (source?.kind === 'step' && !upstream.has(source.stepKey)) {
        const exists = steps.some((s) => s.key === source.stepKey);
        errors.push({
          path,
          message: exists
            ? `step "${step.key}" reads the output of "${source.stepKey}", which is not upstream of it (add it to dependsOn)`
            : `step "${step.key}" reads the output of "${source.stepKey}", which is not a step of this workflow`,
        });
      }
    }
  });
  return errors;
}

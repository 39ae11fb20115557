/** Freezing a definition into an execution snapshot, with the task's per-step constraints merged. Pure. */
import type { Affinity, FieldError, StepConstraints, StepDefinition } from '@tdp/protocol';

export function mergeAffinity(base: Affinity, override: Affinity): Affinity {
  const merged: Affinity = { ...base };
  if (override.nodeId !== undefined) merged.nodeId = override.nodeId;
  if (override.group !== undefined) merged.group = override.group;
  if (override.requiredLabels) merged.requiredLabels = { ...base.requiredLabels, ...override.requiredLabels };
  if (override.preferredLabels)
    merged.preferredLabels = { ...base.preferredLabels, ...override.preferredLabels };
  if (override.minimumResources) {
    merged.minimumResources = { ...base.minimumResources, ...override.minimumResources };
  }
  return merged;
}

export function applyStepConstraints(
  steps: StepDefinition[],
  constraints: StepConstraints | undefined,
): { steps: StepDefinition[]; errors: FieldError[] } {
  if (!constraints) return { steps, errors: [] };
  const known = new Set(steps.map((s) => s.key));
  const errors: FieldError[] = Object.keys(constraints)
    .filter((key) => !known.has(key))
    .map((key) => ({
      path: `/stepConstraints/${key}`,
      message: `"${key}" is not a step of this workflow (steps: ${[...known].join(', ')})`,
    }));
  if (errors.length > 0) return { steps, errors };
  return {
    steps: steps.map((step) => {
      const override = constraints[step.key];
      return override ? { ...step, affinity: mergeAffinity(step.affinity, override) } : step;
    }),
    errors: [],
  };
}

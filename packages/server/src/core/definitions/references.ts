/**
 * References in mappings (`$.input…`, `$.steps.<key>.output…`) and the upstream rule they follow. Pure.
 */
import type { FieldError, StepDefinition } from '@tdp/protocol';

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

/**
 * The references of one mapping (a step's `inputMapping`, or a kind's own) read only the task input or
 * steps upstream of `step`; `$.item` only where `allowItem` (inside a map).
 */
export function checkMapping(
  steps: StepDefinition[],
  step: StepDefinition,
  mapping: Record<string, unknown>,
  basePath: string,
  allowItem = false,
): FieldError[] {
  const errors: FieldError[] = [];
  for (const [field, value] of Object.entries(mapping)) {
    const path = `${basePath}/${field}`;
    if (allowItem && typeof value === 'string' && /^\$\.item(\.|$)/.test(value)) continue;
    errors.push(...checkReference(steps, step, value, path));
  }
  return errors;
}

/** One reference: well formed, and if it reads a step's output, that step is upstream of `step`. */
export function checkReference(
  steps: StepDefinition[],
  step: StepDefinition,
  value: unknown,
  path: string,
): FieldError[] {
  const upstream = upstreamOf(steps, step.key);
  const source = parseMappingReference(value);
  if (source === 'invalid') {
    return [
      { path, message: `"${String(value)}" must be $.input[.field…] or $.steps.<key>.output[.field…]` },
    ];
  }
  if (source?.kind === 'step' && !upstream.has(source.stepKey)) {
    const exists = steps.some((s) => s.key === source.stepKey);
    return [
      {
        path,
        message: exists
          ? `step "${step.key}" reads the output of "${source.stepKey}", which is not upstream of it (add it to dependsOn)`
          : `step "${step.key}" reads the output of "${source.stepKey}", which is not a step of this workflow`,
      },
    ];
  }
  return [];
}

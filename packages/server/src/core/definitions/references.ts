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
 * One value of a mapping. A plain `$.…` string is a REQUIRED reference (absent → the step fails); the
 * object form `{ "from": "$.…", "optional": true }` leaves the key out when the value is absent, and
 * `{ "from": "$.…", "default": <value> }` uses the default. Any other value is a literal. Only an object
 * whose `from` is a `$.` string is the object form, so literal objects published before keep their meaning.
 */
export type MappingEntry =
  | { kind: 'literal'; value: unknown }
  | { kind: 'reference'; from: string; whenAbsent: 'fail' | 'omit' | { default: unknown } };

const entryKeys = new Set(['from', 'optional', 'default']);

function isEntryObject(value: unknown): value is Record<string, unknown> & { from: string } {
  return (
    typeof value === 'object' &&
    value !== null &&
    !Array.isArray(value) &&
    typeof (value as { from?: unknown }).from === 'string' &&
    (value as { from: string }).from.startsWith('$.')
  );
}

/** What a mapping value means; assumes a published (checked) form. */
export function mappingEntry(value: unknown): MappingEntry {
  if (typeof value === 'string' && value.startsWith('$.'))
    return { kind: 'reference', from: value, whenAbsent: 'fail' };
  if (!isEntryObject(value)) return { kind: 'literal', value };
  if (Object.hasOwn(value, 'default'))
    return { kind: 'reference', from: value.from, whenAbsent: { default: value.default } };
  return { kind: 'reference', from: value.from, whenAbsent: value.optional === true ? 'omit' : 'fail' };
}

/** Why an object-form mapping entry is malformed, or null when it is fine (or not the object form). */
export function entryFormError(value: unknown): string | null {
  if (!isEntryObject(value)) return null;
  const unknown = Object.keys(value).filter((k) => !entryKeys.has(k));
  if (unknown.length > 0)
    return `a mapping entry takes only "from", "optional" and "default" (not ${unknown.map((k) => `"${k}"`).join(', ')})`;
  if (Object.hasOwn(value, 'optional') && typeof value.optional !== 'boolean')
    return '"optional" must be true or false';
  if (value.optional === true && Object.hasOwn(value, 'default'))
    return 'a mapping entry is either optional or has a default, not both';
  if (value.optional === false && Object.hasOwn(value, 'default'))
    return 'a mapping entry with a default needs no "optional"';
  return null;
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
    const formError = entryFormError(value);
    if (formError) {
      errors.push({ path, message: formError });
      continue;
    }
    const entry = mappingEntry(value);
    if (entry.kind === 'literal') continue;
    if (allowItem && /^\$\.item(\.|$)/.test(entry.from)) continue;
    errors.push(...checkReference(steps, step, entry.from, path));
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

/**
 * Concurrency keys: what a step declares, how publish checks it, and which slot pool a task's step falls
 * in. A key is named in its tenant (every workflow naming it shares its pools and its limit); its value
 * picks the pool — one per customer for `$.input.customerId`, one for the whole key without a value.
 * Pure: placement (`orchestration/placement.ts`) asks the store to hold the slots.
 */
import { type ConcurrencyKey, type FieldError, type StepDefinition, stepKind } from '@tdp/protocol';
import { schemaGuarantees } from './mappingGuarantees.ts';

export type KeyValueSource =
  | { kind: 'input'; path: string[] }
  | { kind: 'tenant' }
  | { kind: 'application' }
  | { kind: 'owner' }
  | { kind: 'literal'; value: string };

/** What a key's value may be read from: the task's tenant, application, owner and input. */
export interface KeyedTask {
  tenantId: string;
  applicationId: string;
  ownerId: string | null;
  input: unknown;
}

/** A step's key resolved for one task: the pool it holds a slot of, and the declared limit. */
export interface HeldKey {
  name: string;
  value: string;
  /** The limit the definition declares; a limit set through the API takes its place. */
  declaredLimit: number;
}

/**
 * Whether a step's attempts run on workers, so keys and rate limits can hold them: a capability step's
 * attempt, or each item's of a map.
 */
export const startsOnWorkers = (step: StepDefinition): boolean =>
  stepKind(step) === 'capability' || stepKind(step) === 'map';

/**
 * `$.input.a.b`, `$.tenant`, `$.application`, `$.owner`; any other `$.` string is invalid; the rest are
 * literals.
 */
export function keyValueSource(value: string | undefined): KeyValueSource | 'invalid' {
  if (value === undefined) return { kind: 'literal', value: '' };
  if (!value.startsWith('$.')) return { kind: 'literal', value };
  if (value === '$.tenant') return { kind: 'tenant' };
  if (value === '$.application') return { kind: 'application' };
  if (value === '$.owner') return { kind: 'owner' };
  const parts = value.slice(2).split('.');
  if (parts[0] !== 'input' || parts.length < 2 || parts.some((p) => p.length === 0)) return 'invalid';
  return { kind: 'input', path: parts.slice(1) };
}

/**
 * The keys each step that runs on workers holds (each map item holds its own slot): the workflow's, then
 * the step's own (`requested`, the steps as
 * published, in the same order as the normalised `steps`). Steps without keys carry no field, so
 * definitions without keys keep their content hash.
 */
export function applyConcurrency(
  steps: StepDefinition[],
  requested: { concurrency?: ConcurrencyKey[] }[],
  workflowKeys: ConcurrencyKey[] | undefined,
): StepDefinition[] {
  return steps.map((step, index) => {
    const keys = [...(workflowKeys ?? []), ...(requested[index]?.concurrency ?? [])];
    if (!startsOnWorkers(step) || keys.length === 0) return step;
    return { ...step, concurrency: keys };
  });
}

/**
 * Publish's checks: keys only on capability and map steps, a value that is a reference TDP can read, an input
 * path the input schema guarantees (a step never waits on a pool named by a missing value), no key
 * twice on a step, and one limit per key name across the workflow. Each key is checked once, where it
 * is declared: a workflow's key is reported at `/concurrency/<i>`, not on every step that holds it.
 */
export function concurrencyErrors(
  requested: { concurrency?: ConcurrencyKey[] | undefined; steps: { concurrency?: ConcurrencyKey[] }[] },
  steps: StepDefinition[],
  inputSchema: Record<string, unknown>,
): FieldError[] {
  const errors: FieldError[] = [];
  requested.steps.forEach((step, index) => {
    if (step.concurrency?.length && !startsOnWorkers(steps[index]!))
      errors.push({
        path: `/steps/${index}/concurrency`,
        message: `step ${steps[index]!.key}: only a capability or map step holds concurrency keys`,
      });
  });
  const workflowKeys = requested.concurrency ?? [];
  const workflowNames = new Set<string>();
  workflowKeys.forEach((key, i) => {
    if (workflowNames.has(key.key))
      errors.push({
        path: `/concurrency/${i}`,
        message: `the workflow names concurrency key ${key.key} twice`,
      });
    workflowNames.add(key.key);
  });
  requested.steps.forEach((step, index) => {
    const names = new Set(workflowNames);
    (step.concurrency ?? []).forEach((key, i) => {
      if (names.has(key.key))
        errors.push({
          path: `/steps/${index}/concurrency/${i}`,
          message: `step ${steps[index]!.key} names concurrency key ${key.key} twice`,
        });
      names.add(key.key);
    });
  });
  const declared: [ConcurrencyKey, string][] = [
    ...workflowKeys.map((key, i): [ConcurrencyKey, string] => [key, `/concurrency/${i}`]),
    ...requested.steps.flatMap((step, index) =>
      (step.concurrency ?? []).map((key, i): [ConcurrencyKey, string] => [
        key,
        `/steps/${index}/concurrency/${i}`,
      ]),
    ),
  ];
  const limits = new Map<string, number>();
  for (const [key, path] of declared) {
    const known = limits.get(key.key);
    if (known !== undefined && known !== key.limit)
      errors.push({
        path,
        message: `concurrency key ${key.key} is declared with limits ${known} and ${key.limit}; a key has one limit`,
      });
    if (known === undefined) limits.set(key.key, key.limit);
    const source = keyValueSource(key.value);
    if (source === 'invalid')
      errors.push({
        path,
        message: `concurrency key ${key.key}: value ${key.value} is not $.input.<path>, $.tenant, $.application, $.owner or a literal`,
      });
    else if (source.kind === 'input' && !schemaGuarantees(inputSchema, source.path))
      errors.push({
        path,
        message: `concurrency key ${key.key}: the inputSchema does not guarantee ${key.value} (make it required)`,
      });
  }
  return errors;
}

/** The pools a step of this task falls in. A value read from the input is its JSON text unless a string. */
export function resolveConcurrencyKeys(definition: StepDefinition, task: KeyedTask): HeldKey[] {
  return (definition.concurrency ?? []).map((key) => {
    const source = keyValueSource(key.value);
    return { name: key.key, value: poolValue(source, task), declaredLimit: key.limit };
  });
}

/**
 * The pool a task falls in by a key's value (rate limits name their pools the same way). Tasks created
 * without an owner share the owner key's pool named by the empty value.
 */
export function poolValue(source: KeyValueSource | 'invalid', task: KeyedTask) {
  if (source === 'invalid') return '';
  switch (source.kind) {
    case 'literal':
      return source.value;
    case 'tenant':
      return task.tenantId;
    case 'application':
      return task.applicationId;
    case 'owner':
      return task.ownerId ?? '';
    case 'input': {
      let value: unknown = task.input;
      for (const part of source.path)
        value =
          value !== null && typeof value === 'object' ? (value as Record<string, unknown>)[part] : undefined;
      return typeof value === 'string' ? value : (JSON.stringify(value) ?? '');
    }
  }
}

/** How a waiting step says which pool holds it: "customer 42 at its limit 3/3", "export paused". */
export function heldKeyReason(
  key: { name: string; value: string },
  running: number,
  limit: number,
  paused: boolean,
) {
  const pool = key.value === '' ? key.name : `${key.name} ${key.value}`;
  return paused ? `${pool} paused` : `${pool} at its limit ${running}/${limit}`;
}

/**
 * The advisory lock a placer holds on a pool (of slots, or a rate limit's tokens) until commit. A
 * scheduler round takes the locks of all the pools it may place on at once, in one sorted call, before
 * it places; placing then takes them again (a transaction may), so two rounds never wait on each other
 * in a circle.
 */
export const poolLockKey = (kind: 'concurrency' | 'rate', tenantId: string, name: string, value: string) =>
  `${kind}:${tenantId}:${name}:${value}`;

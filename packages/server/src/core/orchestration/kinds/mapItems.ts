/**
 * Fan-out over data (kind `map`), the decisions: which array a map runs over, each item's input, what
 * a finished item attempt does to its item (retry or not), the map's counters, and when the map is over
 * and with what output. Pure: the map step's consequences (kinds/map.ts) reads and writes the rows.
 *
 * Glossary
 * - item: one element of the array at `map.items`; one capability attempt at a time runs it.
 * - counters: how many items are pending (waiting for a slot or for a retry), running, succeeded and
 *   failed; kept on the map step (`waitingFor`), so a finished item writes its own row and the step's.
 * - FAIL_ALL: the first item that fails for good fails the map; the items not yet finished are cancelled.
 * - CONTINUE: every item runs; the output lists per item `{ output }` or `{ error }`.
 */
import type { MapOptions, StepDefinition, StructuredError } from '@tdp/protocol';
import { mappingEntry, parseMappingReference } from '../../definitions/references.ts';
import type { MapItemRecord, StepRecord, TaskState } from '../../facts/records.ts';
import { missingInputMessage, resolveInput } from '../advance.ts';

/** The map's counters, as `waitingFor` shows them; the other items are pending (or waiting to retry). */
export interface MapCounters {
  total: number;
  running: number;
  succeeded: number;
  failed: number;
}

export const pendingOf = (c: MapCounters) => c.total - c.running - c.succeeded - c.failed;

/** The map options of a step definition (a map step always has them: checked at publish). */
export function mapOptionsOf(definition: StepDefinition): MapOptions {
  if (!definition.map) throw new Error(`step ${definition.key} has no map options`);
  return definition.map;
}

export const initialCounters = (total: number): MapCounters => ({
  total,
  running: 0,
  succeeded: 0,
  failed: 0,
});

/** `$.item` or `$.item.<field>…`: the path into the item, or null for any other value. */
export function itemReference(value: unknown): string[] | null {
  if (typeof value !== 'string') return null;
  if (value === '$.item') return [];
  return value.startsWith('$.item.') ? value.slice('$.item.'.length).split('.') : null;
}

function pick(value: unknown, path: string[]): { found: boolean; value?: unknown } {
  let current = value;
  for (const part of path) {
    if (current === null || typeof current !== 'object' || !(part in (current as Record<string, unknown>)))
      return { found: false };
    current = (current as Record<string, unknown>)[part];
  }
  return { found: true, value: current };
}

/** Outputs of the current succeeded steps (as `stepOutputs` of transitionRecords.ts, not imported twice). */
function outputsOf(state: TaskState): Record<string, unknown> {
  return Object.fromEntries(
    state.steps.filter((s) => s.current && s.status === 'SUCCEEDED').map((s) => [s.key, s.stateData]),
  );
}

export type MapItemsResolution =
  | { ok: true; items: unknown[] }
  | { ok: false; code: 'INPUT_MAPPING_FAILED'; message: string };

/** The array the map runs over; anything else fails the step with INPUT_MAPPING_FAILED naming the path. */
export function resolveMapItems(state: TaskState, definition: StepDefinition): MapItemsResolution {
  const { items } = mapOptionsOf(definition);
  const source = parseMappingReference(items);
  const fail = (what: string): MapItemsResolution => ({
    ok: false,
    code: 'INPUT_MAPPING_FAILED',
    message: `step ${definition.key}: map.items ${items} ${what}`,
  });
  if (source === null || source === 'invalid') return fail('is not a reference');
  const from = source.kind === 'input' ? state.task.input : outputsOf(state)[source.stepKey];
  const found = pick(from, source.path);
  if (!found.found) return fail('is missing');
  if (!Array.isArray(found.value)) return fail(`is not an array (${describe(found.value)})`);
  return { ok: true, items: found.value };
}

const describe = (value: unknown) => (value === null ? 'null' : typeof value);

/** How many items one map step, and a task's map steps together, may have (`0`: no limit). */
export interface MapItemLimits {
  perStep: number;
  perTask: number;
}

/** MAP_ITEMS_LIMIT's message when `items` of step `key`, `taskItems` with the task's other maps, pass a limit. */
export function mapItemsProblem(
  key: string,
  items: number,
  taskItems: number,
  limits: MapItemLimits,
): string | null {
  if (limits.perStep > 0 && items > limits.perStep)
    return `step ${key} maps over ${items} items; a map step may have at most ${limits.perStep}`;
  if (limits.perTask > 0 && taskItems > limits.perTask)
    return `step ${key} maps over ${items} items, ${taskItems} with the task's other map steps; a task may have at most ${limits.perTask}`;
  return null;
}

/** At create: the maps over the task's own input are counted at once (those over outputs when they begin). */
export function inputMapItemsProblem(
  steps: StepDefinition[],
  input: unknown,
  limits: MapItemLimits,
): string | null {
  let taskItems = 0;
  for (const step of steps) {
    const source = step.map ? parseMappingReference(step.map.items) : null;
    if (!source || source === 'invalid' || source.kind !== 'input') continue;
    const found = pick(input, source.path);
    if (!found.found || !Array.isArray(found.value)) continue;
    taskItems += found.value.length;
    const problem = mapItemsProblem(step.key, found.value.length, taskItems, limits);
    if (problem) return problem;
  }
  return null;
}

/** The items of the execution's other current map steps (begun ones; a pending map has none yet). */
export function otherMapItems(state: TaskState, stepId: string): number {
  let total = 0;
  for (const step of state.steps) {
    if (!step.current || step.id === stepId || step.executionId !== state.execution.id) continue;
    const definition = state.execution.snapshot.steps.find((d) => d.key === step.key);
    if (!definition?.map) continue;
    total += step.waitingFor?.kind === 'map' ? step.waitingFor.total : (step.progress?.total ?? 0);
  }
  return total;
}

export type ItemInput =
  | { ok: true; value: Record<string, unknown> }
  | { ok: false; code: 'INPUT_MAPPING_MISSING'; message: string; detail: string };

/** One item's input: `$.item…` from the item, every other reference as a capability step's mapping. */
export function itemInput(
  state: TaskState,
  definition: StepDefinition,
  item: unknown,
  index: number,
): ItemInput {
  const mapping = mapOptionsOf(definition).inputMapping ?? {};
  const value: Record<string, unknown> = {};
  const rest: Record<string, unknown> = {};
  for (const [field, expression] of Object.entries(mapping)) {
    const entry = mappingEntry(expression);
    const path = entry.kind === 'reference' ? itemReference(entry.from) : null;
    if (entry.kind === 'literal' || path === null) {
      rest[field] = expression;
      continue;
    }
    const found = pick(item, path);
    if (found.found) value[field] = found.value;
    else if (typeof entry.whenAbsent === 'object') value[field] = entry.whenAbsent.default;
    else if (entry.whenAbsent === 'fail')
      return {
        ok: false,
        code: 'INPUT_MAPPING_MISSING',
        message: missingInputMessage,
        detail: `item ${index} of step ${definition.key} has no ${entry.from} for "${field}"`,
      };
  }
  const others = resolveInput({ ...definition, inputMapping: rest }, state.task.input, outputsOf(state));
  if (!others.ok) return others;
  return { ok: true, value: { ...others.value, ...value } };
}

/** What an item attempt that ended reports. `lost`: the worker went away (retried while attempts remain). */
export type ItemResult =
  | { kind: 'SUCCEEDED'; output: unknown }
  | { kind: 'FAILED'; error: StructuredError; lost: boolean };

export type ItemChange =
  | { kind: 'SUCCEEDED'; item: MapItemRecord }
  | { kind: 'FAILED'; item: MapItemRecord }
  /** Its next attempt waits for the back-off (`delayMs`), then the item is pending again. */
  | { kind: 'RETRY'; item: MapItemRecord; delayMs: number };

/** Back-off before attempt `nextAttempt` (2, 3, …), as for steps: initial × multiplier^(n−2), capped. */
const backoffMs = (retry: StepDefinition['retry'], nextAttempt: number) =>
  Math.min(retry.maxBackoffMs, Math.round(retry.initialBackoffMs * retry.multiplier ** (nextAttempt - 2)));

/** An item attempt ended: the item's next state under the map step's retry policy. */
export function settleItem(
  definition: StepDefinition,
  item: MapItemRecord,
  result: ItemResult,
  at: Date,
): ItemChange {
  if (result.kind === 'SUCCEEDED')
    return {
      kind: 'SUCCEEDED',
      item: { ...item, status: 'SUCCEEDED', output: result.output ?? null, error: null, updatedAt: at },
    };
  // As for a step (advance.ts): a lost attempt is retried under every policy, a failed one unless FAIL_TASK.
  const { retry } = definition;
  const retryable =
    result.lost ||
    (definition.failurePolicy !== 'FAIL_TASK' &&
      result.error.retryable &&
      !retry.nonRetryableErrorCodes.includes(result.error.code));
  if (retryable && item.attempt < retry.maxAttempts)
    return {
      kind: 'RETRY',
      item: { ...item, status: 'WAITING_RETRY', error: result.error, updatedAt: at },
      delayMs: backoffMs(retry, item.attempt + 1),
    };
  return { kind: 'FAILED', item: { ...item, status: 'FAILED', error: result.error, updatedAt: at } };
}

/** The counters after items moved from `before` statuses to `after` ones. */
export function countersAfter(
  counters: MapCounters,
  moves: { from: MapItemRecord['status']; to: MapItemRecord['status'] }[],
): MapCounters {
  const next = { ...counters };
  // Pending and waiting items are not counted: they are what is left.
  const field = (status: MapItemRecord['status']): keyof MapCounters | null =>
    status === 'RUNNING'
      ? 'running'
      : status === 'SUCCEEDED'
        ? 'succeeded'
        : status === 'FAILED'
          ? 'failed'
          : null;
  for (const { from, to } of moves) {
    const a = field(from);
    const b = field(to);
    if (a) next[a] -= 1;
    if (b) next[b] += 1;
  }
  return next;
}

/** How many more items may run now: `maxParallel` less the running ones (no cap without it). */
export function roomFor(definition: StepDefinition, counters: MapCounters): number {
  const { maxParallel } = mapOptionsOf(definition);
  const cap = maxParallel ?? Number.POSITIVE_INFINITY;
  return Math.max(0, Math.min(cap - counters.running, pendingOf(counters)));
}

export type MapVerdict =
  | { kind: 'RUNNING' }
  | { kind: 'SUCCEEDED' }
  /** FAIL_ALL: an item failed for good (the first one in this batch, by index). */
  | { kind: 'FAILED'; item: MapItemRecord };

export function mapVerdict(
  definition: StepDefinition,
  counters: MapCounters,
  failedNow: MapItemRecord[],
): MapVerdict {
  const policy = mapOptionsOf(definition).onItemFailure ?? 'FAIL_ALL';
  if (policy === 'FAIL_ALL' && failedNow.length > 0)
    return { kind: 'FAILED', item: [...failedNow].sort((a, b) => a.index - b.index)[0]! };
  return counters.succeeded + counters.failed === counters.total
    ? { kind: 'SUCCEEDED' }
    : { kind: 'RUNNING' };
}

/** The map's output, in item order: the outputs (FAIL_ALL), or `{ output }` / `{ error }` per item (CONTINUE). */
export function mapOutput(definition: StepDefinition, items: MapItemRecord[]): unknown[] {
  const policy = mapOptionsOf(definition).onItemFailure ?? 'FAIL_ALL';
  const ordered = [...items].sort((a, b) => a.index - b.index);
  if (policy === 'FAIL_ALL') return ordered.map((i) => i.output ?? null);
  return ordered.map((i) =>
    i.status === 'SUCCEEDED'
      ? { output: i.output ?? null }
      : {
          error: {
            code: i.error?.code ?? 'STEP_FAILED',
            ...(i.error?.userMessage ? { message: i.error.userMessage } : {}),
          },
        },
  );
}

/** The error the map fails with when an item fails for good under FAIL_ALL (the map itself is not retried). */
export function mapFailure(step: StepRecord, item: MapItemRecord): StructuredError {
  const code = item.error?.code ?? 'STEP_FAILED';
  return {
    category: item.error?.category ?? 'UNKNOWN',
    code,
    retryable: false,
    userMessage: `Item ${item.index} of step ${step.key} failed${item.error?.userMessage ? `: ${item.error.userMessage}` : ` (${code})`}`,
  };
}

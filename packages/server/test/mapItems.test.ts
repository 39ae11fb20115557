/**
 * The map step's decisions (kinds/mapItems.ts), pure: the array it runs over, an item's input, what an
 * ended item attempt does under the step's retry policy, the counters, the verdict and the output.
 */
import type { StepDefinition } from '@tdp/protocol';
import { describe, expect, it } from 'vitest';
import { normaliseSteps } from '../src/core/definitions/dag.ts';
import type { MapItemRecord, TaskState } from '../src/core/facts/records.ts';
import {
  countersAfter,
  initialCounters,
  itemInput,
  mapOutput,
  mapVerdict,
  resolveMapItems,
  roomFor,
  settleItem,
} from '../src/core/orchestration/kinds/mapItems.ts';

const at = new Date('2026-12-01T12:00:00Z');

function mapStep(map: Record<string, unknown>, extra: Record<string, unknown> = {}): StepDefinition {
  return normaliseSteps([
    {
      key: 'each',
      kind: 'map',
      map: { items: '$.input.items', capability: 'c', capabilityVersion: '1', ...map },
      ...extra,
    } as never,
  ])[0]!;
}

const state = (input: unknown, outputs: Record<string, unknown> = {}) =>
  ({
    task: { input },
    steps: Object.entries(outputs).map(([key, stateData]) => ({
      key,
      current: true,
      status: 'SUCCEEDED',
      stateData,
    })),
  }) as unknown as TaskState;

const item = (index: number, patch: Partial<MapItemRecord> = {}): MapItemRecord => ({
  stepId: 's',
  index,
  status: 'RUNNING',
  attempt: 1,
  attemptId: `a${index}`,
  output: null,
  error: null,
  updatedAt: at,
  ...patch,
});

describe('map items', () => {
  it('runs over the array at map.items, and names the path when there is none', () => {
    expect(resolveMapItems(state({ items: [1, 2] }), mapStep({}))).toEqual({ ok: true, items: [1, 2] });
    const upstream = mapStep({ items: '$.steps.list.output.frames' });
    expect(resolveMapItems(state({}, { list: { frames: ['a'] } }), upstream)).toEqual({
      ok: true,
      items: ['a'],
    });
    const notArray = resolveMapItems(state({ items: { a: 1 } }), mapStep({}));
    expect(notArray).toMatchObject({ ok: false, code: 'INPUT_MAPPING_FAILED' });
    expect(!notArray.ok && notArray.message).toContain('$.input.items is not an array (object)');
    const missing = resolveMapItems(state({}), mapStep({}));
    expect(!missing.ok && missing.message).toContain('$.input.items is missing');
  });

  it('maps $.item, $.item.<field> and the usual references into an item’s input', () => {
    const definition = mapStep({
      inputMapping: { whole: '$.item', id: '$.item.frame.id', label: '$.input.label', fixed: 7 },
    });
    expect(itemInput(state({ label: 'cat' }), definition, { frame: { id: 'f1' } }, 0)).toEqual({
      ok: true,
      value: { whole: { frame: { id: 'f1' } }, id: 'f1', label: 'cat', fixed: 7 },
    });
    const missing = itemInput(state({ label: 'cat' }), definition, { frame: {} }, 3);
    expect(missing).toMatchObject({ ok: false, code: 'INPUT_MAPPING_MISSING' });
    expect(!missing.ok && missing.detail).toContain('item 3');
    expect(!missing.ok && missing.message).not.toContain('$.');
  });

  it('retries an item as the step would be retried: lost always, failed unless FAIL_TASK or out of attempts', () => {
    const retrying = mapStep(
      {},
      {
        failurePolicy: 'RETRY_THEN_FAIL_TASK',
        retry: { maxAttempts: 3, initialBackoffMs: 100, multiplier: 2 },
      },
    );
    const error = { category: 'X', code: 'E', retryable: true };
    expect(settleItem(retrying, item(0), { kind: 'FAILED', error, lost: false }, at)).toMatchObject({
      kind: 'RETRY',
      delayMs: 100,
      item: { status: 'WAITING_RETRY' },
    });
    expect(
      settleItem(retrying, item(0, { attempt: 2 }), { kind: 'FAILED', error, lost: false }, at),
    ).toMatchObject({ kind: 'RETRY', delayMs: 200 });
    expect(
      settleItem(retrying, item(0, { attempt: 3 }), { kind: 'FAILED', error, lost: false }, at).kind,
    ).toBe('FAILED');
    expect(
      settleItem(
        retrying,
        item(0),
        { kind: 'FAILED', error: { ...error, retryable: false }, lost: false },
        at,
      ).kind,
    ).toBe('FAILED');
    const failTask = mapStep({});
    expect(settleItem(failTask, item(0), { kind: 'FAILED', error, lost: false }, at).kind).toBe('FAILED');
    expect(settleItem(failTask, item(0), { kind: 'FAILED', error, lost: true }, at).kind).toBe('RETRY');
    expect(settleItem(failTask, item(0), { kind: 'SUCCEEDED', output: { n: 1 } }, at).item).toMatchObject({
      status: 'SUCCEEDED',
      output: { n: 1 },
    });
  });

  it('keeps the counters, the room under maxParallel, the verdict and the output in item order', () => {
    const definition = mapStep({ maxParallel: 2 });
    let counters = countersAfter(initialCounters(3), [
      { from: 'PENDING', to: 'RUNNING' },
      { from: 'PENDING', to: 'RUNNING' },
    ]);
    expect(counters).toEqual({ total: 3, running: 2, succeeded: 0, failed: 0 });
    expect(roomFor(definition, counters)).toBe(0);
    counters = countersAfter(counters, [{ from: 'RUNNING', to: 'SUCCEEDED' }]);
    expect(roomFor(definition, counters)).toBe(1);
    expect(roomFor(mapStep({}), initialCounters(5))).toBe(5);
    const failed = item(1, { status: 'FAILED', error: { category: 'X', code: 'BAD', retryable: false } });
    expect(mapVerdict(definition, counters, [failed])).toEqual({ kind: 'FAILED', item: failed });
    const keepGoing = mapStep({ onItemFailure: 'CONTINUE' });
    expect(mapVerdict(keepGoing, counters, [failed]).kind).toBe('RUNNING');
    const done = { total: 3, running: 0, succeeded: 2, failed: 1 };
    expect(mapVerdict(keepGoing, done, []).kind).toBe('SUCCEEDED');
    const items = [
      item(2, { status: 'SUCCEEDED', output: 'c' }),
      failed,
      item(0, { status: 'SUCCEEDED', output: 'a' }),
    ];
    expect(mapOutput(keepGoing, items)).toEqual([
      { output: 'a' },
      { error: { code: 'BAD' } },
      { output: 'c' },
    ]);
    expect(
      mapOutput(
        definition,
        items.filter((i) => i.status === 'SUCCEEDED'),
      ),
    ).toEqual(['a', 'c']);
  });
});

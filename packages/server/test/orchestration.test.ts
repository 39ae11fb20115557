import type { StepDefinition } from '@tdp/protocol';
import { describe, expect, it } from 'vitest';
import { normaliseSteps } from '../src/core/definitions/dag.ts';
import {
  advance,
  missingInputMessage,
  resolveInput,
  retryDelayMs,
  type StepState,
} from '../src/core/orchestration/advance.ts';

const dag = (
  specs: {
    key: string;
    dependsOn?: string[];
    failurePolicy?: StepDefinition['failurePolicy'];
    maxAttempts?: number;
    inputMapping?: Record<string, unknown>;
  }[],
) =>
  normaliseSteps(
    specs.map((s) => ({
      key: s.key,
      capability: 'c',
      capabilityVersion: '1',
      dependsOn: s.dependsOn ?? [],
      inputMapping: s.inputMapping ?? {},
      ...(s.failurePolicy ? { failurePolicy: s.failurePolicy } : {}),
      retry: { maxAttempts: s.maxAttempts ?? 3, initialBackoffMs: 1000, maxBackoffMs: 5000, multiplier: 2 },
    })),
  );

const states = (
  entries: Record<string, StepState['status']>,
  attempts: Record<string, number> = {},
): StepState[] =>
  Object.entries(entries).map(([key, status]) => ({ key, status, attempt: attempts[key] ?? 1 }));

const kinds = (transitions: ReturnType<typeof advance>) =>
  transitions.map((t) => `${t.kind}${'stepKey' in t ? `:${t.stepKey}` : ''}`);

describe('advance', () => {
  const diamond = dag([
    { key: 'a' },
    { key: 'b', dependsOn: ['a'] },
    { key: 'c', dependsOn: ['a'] },
    { key: 'd', dependsOn: ['b', 'c'] },
  ]);

  it('starts the roots, then fans out and fans in across a diamond', () => {
    expect(
      kinds(
        advance(diamond, states({ a: 'WAITING', b: 'WAITING', c: 'WAITING', d: 'WAITING' }), {
          kind: 'EXECUTION_STARTED',
        }),
      ),
    ).toEqual(['STEP_READY:a']);
    expect(
      kinds(
        advance(diamond, states({ a: 'SUCCEEDED', b: 'WAITING', c: 'WAITING', d: 'WAITING' }), {
          kind: 'STEP_SUCCEEDED',
          stepKey: 'a',
        }),
      ),
    ).toEqual(['STEP_READY:b', 'STEP_READY:c']);
    // d waits for both.
    expect(
      kinds(
        advance(diamond, states({ a: 'SUCCEEDED', b: 'SUCCEEDED', c: 'RUNNING', d: 'WAITING' }), {
          kind: 'STEP_SUCCEEDED',
          stepKey: 'b',
        }),
      ),
    ).toEqual([]);
    expect(
      kinds(
        advance(diamond, states({ a: 'SUCCEEDED', b: 'SUCCEEDED', c: 'SUCCEEDED', d: 'WAITING' }), {
          kind: 'STEP_SUCCEEDED',
          stepKey: 'c',
        }),
      ),
    ).toEqual(['STEP_READY:d']);
    expect(
      advance(diamond, states({ a: 'SUCCEEDED', b: 'SUCCEEDED', c: 'SUCCEEDED', d: 'SUCCEEDED' }), {
        kind: 'STEP_SUCCEEDED',
        stepKey: 'd',
      }),
    ).toEqual([{ kind: 'EXECUTION_SUCCEEDED', degraded: false }]);
  });

  it('readies a wide fan-out at once and joins it', () => {
    const keys = Array.from({ length: 50 }, (_, i) => `p${i}`);
    const wide = dag([
      { key: 'root' },
      ...keys.map((key) => ({ key, dependsOn: ['root'] })),
      { key: 'join', dependsOn: keys },
    ]);
    const after = advance(
      wide,
      states({ root: 'SUCCEEDED', ...Object.fromEntries(keys.map((k) => [k, 'WAITING'])), join: 'WAITING' }),
      { kind: 'STEP_SUCCEEDED', stepKey: 'root' },
    );
    expect(after.filter((t) => t.kind === 'STEP_READY')).toHaveLength(50);
    const joined = advance(
      wide,
      states({
        root: 'SUCCEEDED',
        ...Object.fromEntries(keys.map((k) => [k, 'SUCCEEDED'])),
        join: 'WAITING',
      }),
      { kind: 'STEP_SUCCEEDED', stepKey: 'p49' },
    );
    expect(kinds(joined)).toEqual(['STEP_READY:join']);
  });

  it('retries with back-off, then ends the execution (RETRY_THEN_FAIL_TASK)', () => {
    const steps = dag([
      { key: 'a', failurePolicy: 'RETRY_THEN_FAIL_TASK', maxAttempts: 3 },
      { key: 'b', dependsOn: ['a'] },
    ]);
    const fail = (attempt: number, retryable = true) =>
      advance(steps, states({ a: 'FAILED', b: 'WAITING' }, { a: attempt }), {
        kind: 'STEP_FAILED',
        stepKey: 'a',
        errorCode: 'TIMEOUT',
        retryable,
      });
    expect(fail(1)).toEqual([
      { kind: 'RETRY_SCHEDULED', stepKey: 'a', attempt: 2, delayMs: 1000, reason: 'TIMEOUT' },
    ]);
    expect(fail(2)).toEqual([
      { kind: 'RETRY_SCHEDULED', stepKey: 'a', attempt: 3, delayMs: 2000, reason: 'TIMEOUT' },
    ]);
    expect(kinds(fail(3))).toEqual(['STEP_CANCELLED:b', 'EXECUTION_FAILED:a']);
    expect(kinds(fail(1, false))).toEqual(['STEP_CANCELLED:b', 'EXECUTION_FAILED:a']);
    expect(retryDelayMs(steps[0]!.retry, 6)).toBe(5000);
  });

  it('FAIL_TASK ends at once; CONTINUE_WITH_WARNING skips the dependents and finishes degraded', () => {
    const failFast = dag([{ key: 'a', failurePolicy: 'FAIL_TASK' }, { key: 'b' }]);
    expect(
      kinds(
        advance(failFast, states({ a: 'FAILED', b: 'RUNNING' }), {
          kind: 'STEP_FAILED',
          stepKey: 'a',
          errorCode: 'X',
          retryable: true,
        }),
      ),
    ).toEqual(['STEP_CANCELLED:b', 'EXECUTION_FAILED:a']);
    const soft = dag([
      { key: 'a', failurePolicy: 'CONTINUE_WITH_WARNING', maxAttempts: 1 },
      { key: 'b', dependsOn: ['a'] },
      { key: 'c', dependsOn: ['b'] },
      { key: 'd' },
    ]);
    const after = advance(soft, states({ a: 'FAILED', b: 'WAITING', c: 'WAITING', d: 'SUCCEEDED' }), {
      kind: 'STEP_FAILED',
      stepKey: 'a',
      errorCode: 'X',
      retryable: true,
    });
    expect(after).toEqual([
      { kind: 'STEP_SKIPPED', stepKey: 'b', reason: 'a failed' },
      { kind: 'STEP_SKIPPED', stepKey: 'c', reason: 'b skipped' },
      { kind: 'EXECUTION_SUCCEEDED', degraded: true },
    ]);
  });

  it('a due retry makes the waiting step ready again, once', () => {
    const steps = dag([{ key: 'a', failurePolicy: 'RETRY_THEN_FAIL_TASK' }]);
    expect(advance(steps, states({ a: 'WAITING' }, { a: 2 }), { kind: 'RETRY_DUE', stepKey: 'a' })).toEqual([
      { kind: 'STEP_READY', stepKey: 'a', attempt: 2 },
    ]);
    expect(advance(steps, states({ a: 'READY' }, { a: 2 }), { kind: 'RETRY_DUE', stepKey: 'a' })).toEqual([]);
  });
});

describe('input mapping', () => {
  const [step] = dag([
    {
      key: 'w',
      inputMapping: {
        archive: '$.steps.clean.output.archive',
        text: '$.input.watermark.text',
        mode: 'fast',
        all: '$.input',
      },
    },
  ]);

  it('reads the task input and upstream outputs; literals pass through', () => {
    expect(
      resolveInput(step!, { watermark: { text: '© ACME' } }, { clean: { archive: 'asset://z' } }),
    ).toEqual({
      ok: true,
      value: { archive: 'asset://z', text: '© ACME', mode: 'fast', all: { watermark: { text: '© ACME' } } },
    });
  });

  it('names the missing field for the developer, not for people', () => {
    const missing = resolveInput(step!, { watermark: {} }, { clean: { archive: 'asset://z' } });
    expect(missing).toEqual({
      ok: false,
      code: 'INPUT_MAPPING_MISSING',
      message: missingInputMessage,
      detail: 'step w needs $.input.watermark.text for "text", and it is missing',
    });
    expect(resolveInput(step!, { watermark: { text: 'x' } }, {})).toMatchObject({
      ok: false,
      detail: expect.stringContaining('$.steps.clean.output.archive'),
    });
  });
});

describe('lost attempts', () => {
  it('retries an attempt lost with its worker under every policy, while attempts remain', () => {
    const steps = normaliseSteps([
      {
        key: 'a',
        capability: 'c',
        capabilityVersion: '1',
        failurePolicy: 'FAIL_TASK',
        retry: { maxAttempts: 2 },
      },
    ]);
    const lost = (attempt: number) =>
      advance(steps, [{ key: 'a', status: 'FAILED', attempt }], {
        kind: 'STEP_FAILED',
        stepKey: 'a',
        errorCode: 'WORKER_LOST',
        retryable: true,
        infrastructure: true,
      });
    expect(lost(1)).toMatchObject([{ kind: 'RETRY_SCHEDULED', attempt: 2 }]);
    expect(lost(2).map((t) => t.kind)).toEqual(['EXECUTION_FAILED']);
  });
});

/**
 * Properties of `advance` over generated DAGs run to their end: every transition is one the step's state
 * allows, attempts only rise and stay within the retry policy, a retry waits for its back-off, the
 * execution ends exactly once (never stuck), and applying a fact's result again changes nothing.
 */
import type { StepDefinition, StepStatus } from '@tdp/protocol';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { normaliseSteps } from '../src/core/definitions/dag.ts';
import {
  advance,
  type OrchestrationFact,
  type StepState,
  type Transition,
} from '../src/core/orchestration/advance.ts';

const finished: ReadonlySet<StepStatus> = new Set(['SUCCEEDED', 'FAILED', 'SKIPPED', 'CANCELLED']);

/** A DAG of 1–7 steps, each depending on some earlier ones, with a failure policy and a retry budget. */
const dagArbitrary: fc.Arbitrary<StepDefinition[]> = fc
  .integer({ min: 1, max: 7 })
  .chain((count) =>
    fc.tuple(
      ...Array.from({ length: count }, (_, i) =>
        fc.record({
          dependsOn: fc.subarray(Array.from({ length: i }, (_, d) => `s${d}`)),
          failurePolicy: fc.constantFrom('FAIL_TASK', 'RETRY_THEN_FAIL_TASK', 'CONTINUE_WITH_WARNING'),
          maxAttempts: fc.integer({ min: 1, max: 3 }),
        }),
      ),
    ),
  )
  .map((specs) =>
    normaliseSteps(
      specs.map((s, i) => ({
        key: `s${i}`,
        capability: 'c',
        capabilityVersion: '1',
        dependsOn: s.dependsOn,
        inputMapping: {},
        failurePolicy: s.failurePolicy as StepDefinition['failurePolicy'],
        retry: { maxAttempts: s.maxAttempts, initialBackoffMs: 100, maxBackoffMs: 1000, multiplier: 2 },
      })),
    ),
  );

/** What happens next: which runnable step or due retry goes, and how a step's attempt ends. */
const choiceArbitrary = fc.record({
  pick: fc.nat(),
  outcome: fc.constantFrom('success', 'success', 'failure', 'lost'),
  retryable: fc.boolean(),
});

describe('advance over a DAG run to its end (property)', () => {
  it('never makes a forbidden transition, regresses an attempt, skips a back-off or gets stuck', () => {
    fc.assert(
      fc.property(dagArbitrary, fc.array(choiceArbitrary, { maxLength: 80 }), (steps, choices) => {
        const byKey = new Map(steps.map((s) => [s.key, s]));
        const states = new Map<string, StepState>(
          steps.map((s) => [s.key, { key: s.key, status: 'WAITING', attempt: 1 }]),
        );
        const retriesDue = new Set<string>();
        let ended: Transition | null = null;

        const apply = (transitions: Transition[], fact: OrchestrationFact) => {
          const touched = new Set<string>();
          for (const t of transitions) {
            expect(ended).toBeNull();
            if (t.kind === 'EXECUTION_SUCCEEDED') {
              const all = [...states.values()];
              expect(all.every((s) => finished.has(s.status))).toBe(true);
              expect(t.degraded).toBe(all.some((s) => s.status === 'FAILED' || s.status === 'SKIPPED'));
              ended = t;
              continue;
            }
            if (t.kind === 'EXECUTION_FAILED') {
              ended = t;
              continue;
            }
            expect(touched.has(t.stepKey)).toBe(false);
            touched.add(t.stepKey);
            const state = states.get(t.stepKey)!;
            const step = byKey.get(t.stepKey)!;
            switch (t.kind) {
              case 'STEP_READY':
                expect(state.status).toBe('WAITING');
                expect(t.attempt).toBe(state.attempt);
                expect(step.dependsOn.every((d) => states.get(d)!.status === 'SUCCEEDED')).toBe(true);
                // A later attempt starts when its back-off is over, not when something else finishes.
                if (state.attempt > 1) expect(fact).toEqual({ kind: 'RETRY_DUE', stepKey: t.stepKey });
                state.status = 'READY';
                retriesDue.delete(t.stepKey);
                break;
              case 'STEP_SKIPPED':
                expect(state.status).toBe('WAITING');
                expect(
                  step.dependsOn.some((d) =>
                    ['SKIPPED', 'FAILED', 'CANCELLED'].includes(states.get(d)!.status),
                  ),
                ).toBe(true);
                state.status = 'SKIPPED';
                break;
              case 'STEP_CANCELLED':
                expect(finished.has(state.status)).toBe(false);
                state.status = 'CANCELLED';
                retriesDue.delete(t.stepKey);
                break;
              case 'RETRY_SCHEDULED':
                expect(fact).toMatchObject({ kind: 'STEP_FAILED', stepKey: t.stepKey });
                expect(t.attempt).toBe(state.attempt + 1);
                expect(t.attempt).toBeLessThanOrEqual(step.retry.maxAttempts);
                expect(t.delayMs).toBeGreaterThanOrEqual(0);
                expect(t.delayMs).toBeLessThanOrEqual(step.retry.maxBackoffMs);
                state.status = 'WAITING';
                state.attempt = t.attempt;
                retriesDue.add(t.stepKey);
                break;
            }
          }
        };

        apply(advance(steps, [...states.values()], { kind: 'EXECUTION_STARTED' }), {
          kind: 'EXECUTION_STARTED',
        });
        // Every attempt of every step can end once, and every retry can come due once: a bound on the run.
        const bound = steps.reduce((sum, s) => sum + 2 * s.retry.maxAttempts, 1);
        for (let round = 0; round < bound && ended === null; round += 1) {
          const choice = choices[round] ?? { pick: 0, outcome: 'success' as const, retryable: false };
          const runnable = [...states.values()].filter((s) => s.status === 'READY').map((s) => s.key);
          const candidates = [...runnable, ...[...retriesDue].map((key) => `retry:${key}`)];
          // Never stuck: while the execution is open, something can run or a retry will come due.
          expect(candidates.length).toBeGreaterThan(0);
          const picked = candidates[choice.pick % candidates.length]!;
          let fact: OrchestrationFact;
          if (picked.startsWith('retry:')) {
            fact = { kind: 'RETRY_DUE', stepKey: picked.slice('retry:'.length) };
          } else {
            const state = states.get(picked)!;
            state.status = choice.outcome === 'success' ? 'SUCCEEDED' : 'FAILED';
            fact =
              choice.outcome === 'success'
                ? { kind: 'STEP_SUCCEEDED', stepKey: picked }
                : {
                    kind: 'STEP_FAILED',
                    stepKey: picked,
                    errorCode: 'E',
                    retryable: choice.retryable,
                    infrastructure: choice.outcome === 'lost',
                  };
          }
          const before = [...states.values()].map((s) => s.attempt);
          apply(advance(steps, [...states.values()], fact), fact);
          expect([...states.values()].every((s, i) => s.attempt >= before[i]!)).toBe(true);
          // Idempotent: the same fact on the state it produced readies and skips nothing more.
          if (ended === null && fact.kind === 'STEP_SUCCEEDED') {
            const again = advance(steps, [...states.values()], fact);
            expect(again.filter((t) => t.kind === 'STEP_READY' || t.kind === 'STEP_SKIPPED')).toEqual([]);
          }
        }
        expect(ended).not.toBeNull();
      }),
      { numRuns: 500 },
    );
  });
});

/**
 * Rate limits' pure half (`core/definitions/rateLimits.ts`): which steps start under which limits,
 * publish's checks, the bucket a task's step takes a token of, the bucket arithmetic, and the reason
 * a waiting step shows.
 */
import type { ConcurrencyKey, RateLimit } from '@tdp/protocol';
import { describe, expect, it } from 'vitest';
import { normaliseSteps } from '../src/core/definitions/dag.ts';
import {
  applyRateLimits,
  rateLimitErrors,
  rateLimitReason,
  resolveRateLimits,
  takeToken,
} from '../src/core/definitions/rateLimits.ts';

type StepInput = Parameters<typeof normaliseSteps>[0][number];

const capability = (key: string, rateLimits?: RateLimit[], concurrency?: ConcurrencyKey[]): StepInput => ({
  key,
  capability: `cap.${key}`,
  capabilityVersion: '1',
  ...(rateLimits ? { rateLimits } : {}),
  ...(concurrency ? { concurrency } : {}),
});

const publish = (
  requested: StepInput[],
  workflow: { rateLimits?: RateLimit[]; concurrency?: ConcurrencyKey[] } = {},
  inputSchema: Record<string, unknown> = {},
) => {
  const steps = applyRateLimits(normaliseSteps(requested), requested, workflow.rateLimits);
  return { steps, errors: rateLimitErrors({ ...workflow, steps: requested }, steps, inputSchema) };
};

const openai: RateLimit = { key: 'openai', limit: 10, intervalMs: 60_000 };
const schema = { type: 'object', required: ['customerId'], properties: { customerId: { type: 'string' } } };

describe('applyRateLimits', () => {
  it("gives capability and map steps the workflow's limits then their own, and others none", () => {
    const own: RateLimit = { key: 'mail', value: '$.input.customerId', limit: 1, intervalMs: 1000 };
    const each = {
      key: 'each',
      kind: 'map',
      map: { items: '$.input.files', capability: 'cap.each', capabilityVersion: '1' },
      rateLimits: [own],
    } as StepInput;
    const { steps, errors } = publish(
      [capability('a', [own]), { key: 'wait', kind: 'sleep', sleep: { durationMs: 5 } }, each],
      { rateLimits: [openai] },
      schema,
    );
    expect(errors).toEqual([]);
    expect(steps[0]!.rateLimits).toEqual([openai, own]);
    expect(steps[1]!.rateLimits).toBeUndefined();
    // Each item of a map takes a token of the map's limits.
    expect(steps[2]!.rateLimits).toEqual([openai, own]);
  });

  it('leaves a workflow without rate limits as it was (its content hash)', () => {
    const requested = [capability('a')];
    expect(applyRateLimits(normaliseSteps(requested), requested, undefined)).toEqual(
      normaliseSteps(requested),
    );
    expect('rateLimits' in applyRateLimits(normaliseSteps(requested), requested, [])[0]!).toBe(false);
  });
});

describe('rateLimitErrors', () => {
  it('accepts good declarations', () => {
    expect(
      publish([capability('a', [{ ...openai, value: '$.input.customerId' }])], {}, schema).errors,
    ).toEqual([]);
  });

  it.each([
    [
      'a value that is no reference',
      [capability('a', [{ ...openai, value: '$.steps.x.output' }])],
      {},
      'is not $.input',
    ],
    [
      'an input path not guaranteed',
      [capability('a', [{ ...openai, value: '$.input.region' }])],
      {},
      'does not guarantee',
    ],
    [
      'a key twice on a step',
      [capability('a', [openai])],
      { rateLimits: [openai] },
      'names rate limit openai twice',
    ],
    [
      'two rates for one name',
      [capability('a', [openai]), capability('b', [{ ...openai, intervalMs: 1000 }])],
      {},
      'declared as 10 per 1m and 10 per 1s',
    ],
    [
      'a name that is also a concurrency key',
      [capability('a', [openai], [{ key: 'openai', limit: 2 }])],
      {},
      'both a concurrency key and a rate limit',
    ],
    [
      'a rate limit on a step that is no capability',
      [{ key: 'wait', kind: 'sleep', sleep: { durationMs: 5 }, rateLimits: [openai] } as StepInput],
      {},
      'only a capability or map step',
    ],
  ])('rejects %s', (_, steps, workflow, message) => {
    const { errors } = publish(steps, workflow, schema);
    expect(errors.map((e) => e.message).join('; ')).toContain(message);
  });
});

describe('resolveRateLimits', () => {
  it('names the bucket as a concurrency key names its pool', () => {
    const [step] = publish(
      [
        capability('a', [
          { ...openai, value: '$.input.customerId' },
          { ...openai, key: 't', value: '$.tenant' },
        ]),
      ],
      {},
      schema,
    ).steps;
    const task = { tenantId: 'tn', applicationId: 'ap', ownerId: null, input: { customerId: 42 } };
    expect(resolveRateLimits(step!, task)).toEqual([
      { name: 'openai', value: '42', declaredLimit: 10, intervalMs: 60_000 },
      { name: 't', value: 'tn', declaredLimit: 10, intervalMs: 60_000 },
    ]);
  });
});

describe('takeToken', () => {
  const rate = { limit: 10, intervalMs: 60_000 };
  const at = new Date('2030-01-01T12:00:00Z');

  it('takes a token the bucket has', () => {
    expect(takeToken({ tokens: 3, refilledAt: at }, rate, at)).toEqual({ ok: true, tokens: 2 });
  });

  it('refills by the time passed (10 per minute: one each 6 s), never above the limit', () => {
    const later = new Date(at.getTime() + 9000);
    expect(takeToken({ tokens: 0, refilledAt: at }, rate, later)).toEqual({ ok: true, tokens: 0.5 });
    const muchLater = new Date(at.getTime() + 3_600_000);
    expect(takeToken({ tokens: 0, refilledAt: at }, rate, muchLater)).toEqual({ ok: true, tokens: 9 });
  });

  it('refuses an empty bucket with the time its next token comes', () => {
    const result = takeToken({ tokens: 0.5, refilledAt: at }, rate, at);
    expect(result).toEqual({ ok: false, tokens: 0.5, nextAt: new Date('2030-01-01T12:00:03Z') });
  });

  it('refills nothing for a clock behind the bucket', () => {
    const earlier = new Date(at.getTime() - 60_000);
    expect(takeToken({ tokens: 0, refilledAt: at }, rate, earlier).ok).toBe(false);
  });
});

describe('rateLimitReason', () => {
  it('names the pool, the rate and the next start', () => {
    const next = new Date('2030-01-01T12:00:03Z');
    expect(rateLimitReason({ name: 'openai', value: '' }, { limit: 10, intervalMs: 60_000 }, next)).toBe(
      'openai rate 10 per 1m: next start at 12:00:03Z',
    );
    expect(
      rateLimitReason(
        { name: 'mail', value: '42' },
        { limit: 3, intervalMs: 1500 },
        new Date('2030-01-01T08:00:00.250Z'),
      ),
    ).toBe('mail 42 rate 3 per 1500ms: next start at 08:00:00.250Z');
  });
});

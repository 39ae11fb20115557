/**
 * Concurrency keys' pure half (`core/definitions/concurrencyKeys.ts`): what a key's value reads, which
 * steps hold which keys, publish's checks, the pool a task's step falls in, and the reason a held step
 * shows.
 */
import type { ConcurrencyKey, StepDefinition } from '@tdp/protocol';
import { describe, expect, it } from 'vitest';
import {
  applyConcurrency,
  concurrencyErrors,
  heldKeyReason,
  keyValueSource,
  resolveConcurrencyKeys,
} from '../src/core/definitions/concurrencyKeys.ts';
import { normaliseSteps } from '../src/core/definitions/dag.ts';

type StepInput = Parameters<typeof normaliseSteps>[0][number];

const capability = (key: string, concurrency?: ConcurrencyKey[]): StepInput => ({
  key,
  capability: `cap.${key}`,
  capabilityVersion: '1',
  ...(concurrency ? { concurrency } : {}),
});
const map = (key: string, concurrency?: ConcurrencyKey[]): StepInput =>
  ({
    key,
    kind: 'map',
    map: { items: '$.input.files', capability: `cap.${key}`, capabilityVersion: '1' },
    ...(concurrency ? { concurrency } : {}),
  }) as StepInput;
const sleep = (key: string, concurrency?: ConcurrencyKey[]): StepInput => ({
  key,
  kind: 'sleep',
  sleep: { durationMs: 500 },
  ...(concurrency ? { concurrency } : {}),
});

/** Publish's order: normalise, apply the workflow's and steps' keys, then check. */
const publish = (
  requested: StepInput[],
  workflowKeys?: ConcurrencyKey[],
  inputSchema: Record<string, unknown> = {},
) => {
  const steps = applyConcurrency(normaliseSteps(requested), requested, workflowKeys);
  return {
    steps,
    errors: concurrencyErrors({ steps: requested, concurrency: workflowKeys }, steps, inputSchema),
  };
};

const customerSchema = {
  type: 'object',
  required: ['customer'],
  properties: {
    customer: { type: 'object', required: ['id'], properties: { id: { type: 'string' }, tier: {} } },
    region: { type: 'string' },
  },
};

describe('keyValueSource', () => {
  it.each([
    ['$.input.customerId', { kind: 'input', path: ['customerId'] }],
    ['$.input.customer.id', { kind: 'input', path: ['customer', 'id'] }],
    ['$.tenant', { kind: 'tenant' }],
    ['$.application', { kind: 'application' }],
    ['$.owner', { kind: 'owner' }],
    ['exports', { kind: 'literal', value: 'exports' }],
    ['input.customerId', { kind: 'literal', value: 'input.customerId' }],
    [undefined, { kind: 'literal', value: '' }],
  ])('reads %s as %j', (value, source) => {
    expect(keyValueSource(value)).toEqual(source);
  });

  it.each(['$.', '$.input', '$.input.', '$.input..id', '$.steps.a.output', '$.tenant.id', '$.owner.id'])(
    'rejects %s',
    (value) => {
      expect(keyValueSource(value)).toBe('invalid');
    },
  );
});

describe('applyConcurrency', () => {
  const region: ConcurrencyKey = { key: 'region', value: 'eu', limit: 2 };
  const customer: ConcurrencyKey = { key: 'customer', value: '$.input.customer.id', limit: 3 };

  it('gives every capability and map step the workflow’s keys, then its own', () => {
    const { steps, errors } = publish(
      [capability('a'), capability('b', [region]), sleep('c'), map('d', [region])],
      [customer],
      customerSchema,
    );
    expect(errors).toEqual([]);
    expect(steps[0]!.concurrency).toEqual([customer]);
    expect(steps[1]!.concurrency).toEqual([customer, region]);
    // Each item of a map holds a slot of the map's keys.
    expect(steps[3]!.concurrency).toEqual([customer, region]);
  });

  it('puts no field on steps without keys nor on other kinds of step (their content hash stays)', () => {
    const { steps } = publish([capability('a'), sleep('c')], [customer]);
    expect(steps[1]).not.toHaveProperty('concurrency');
    const none = publish([capability('a')]).steps;
    expect(none[0]).not.toHaveProperty('concurrency');
    expect(none).toEqual(normaliseSteps([capability('a')]));
  });
});

describe('concurrencyErrors', () => {
  it('accepts keys by input path the schema requires, by tenant, by application and literals', () => {
    const { errors } = publish(
      [
        capability('a', [{ key: 'customer', value: '$.input.customer.id', limit: 3 }]),
        capability('b', [
          { key: 'tenant', value: '$.tenant', limit: 10 },
          { key: 'export', limit: 1 },
        ]),
      ],
      [{ key: 'app', value: '$.application', limit: 5 }],
      customerSchema,
    );
    expect(errors).toEqual([]);
  });

  it('rejects keys on a step that runs nothing on workers', () => {
    const { errors } = publish([capability('a'), sleep('nap', [{ key: 'k', limit: 1 }])]);
    expect(errors).toEqual([
      {
        path: '/steps/1/concurrency',
        message: 'step nap: only a capability or map step holds concurrency keys',
      },
    ]);
  });

  it('rejects an input path the inputSchema does not guarantee', () => {
    for (const value of ['$.input.region', '$.input.customer.tier', '$.input.missing']) {
      const { errors } = publish(
        [capability('a', [{ key: 'k', value, limit: 1 }])],
        undefined,
        customerSchema,
      );
      expect(errors).toEqual([
        {
          path: '/steps/0/concurrency/0',
          message: `concurrency key k: the inputSchema does not guarantee ${value} (make it required)`,
        },
      ]);
    }
    // Without an inputSchema nothing is guaranteed.
    expect(publish([capability('a', [{ key: 'k', value: '$.input.id', limit: 1 }])]).errors).toHaveLength(1);
  });

  it('rejects a $. reference TDP cannot read', () => {
    const { errors } = publish([capability('a', [{ key: 'k', value: '$.steps.x.output', limit: 1 }])]);
    expect(errors.map((e) => e.message)).toEqual([
      'concurrency key k: value $.steps.x.output is not $.input.<path>, $.tenant, $.application, $.owner or a literal',
    ]);
  });

  it('rejects the same key twice on a step, also when the workflow already names it', () => {
    const twice = publish([
      capability('a', [
        { key: 'k', value: 'x', limit: 1 },
        { key: 'k', value: 'y', limit: 1 },
      ]),
    ]);
    expect(twice.errors).toEqual([
      { path: '/steps/0/concurrency/1', message: 'step a names concurrency key k twice' },
    ]);
    const overWorkflow = publish([capability('a', [{ key: 'k', limit: 1 }])], [{ key: 'k', limit: 1 }]);
    expect(overWorkflow.errors.map((e) => e.message)).toEqual(['step a names concurrency key k twice']);
  });

  it('rejects one key name with two limits, across steps', () => {
    const { errors } = publish([
      capability('a', [{ key: 'k', limit: 2 }]),
      capability('b', [{ key: 'k', limit: 3 }]),
    ]);
    expect(errors).toEqual([
      {
        path: '/steps/1/concurrency/0',
        message: 'concurrency key k is declared with limits 2 and 3; a key has one limit',
      },
    ]);
    // The same name with the same limit on several steps is one key, shared.
    expect(
      publish([
        capability('a', [{ key: 'k', limit: 2 }]),
        capability('b', [{ key: 'k', value: 'v', limit: 2 }]),
      ]).errors,
    ).toEqual([]);
  });
  it('reports a key of the workflow once, where the workflow declares it, however many steps hold it', () => {
    const unreadable = publish(
      [capability('a'), capability('b')],
      [{ key: 'k', value: '$.input.id', limit: 1 }],
    );
    expect(unreadable.errors).toEqual([
      {
        path: '/concurrency/0',
        message: 'concurrency key k: the inputSchema does not guarantee $.input.id (make it required)',
      },
    ]);
    const twice = publish(
      [capability('a'), capability('b')],
      [
        { key: 'k', value: 'x', limit: 1 },
        { key: 'k', value: 'y', limit: 1 },
      ],
    );
    expect(twice.errors).toEqual([
      { path: '/concurrency/1', message: 'the workflow names concurrency key k twice' },
    ]);
    // Checked even when no step holds it.
    expect(publish([sleep('nap')], [{ key: 'k', value: '$.nope', limit: 1 }]).errors).toHaveLength(1);
  });
});

describe('resolveConcurrencyKeys', () => {
  const task = {
    tenantId: 'tenant-1',
    applicationId: 'application-1',
    ownerId: 'owner-7' as string | null,
    input: { customer: { id: 'c-42', tier: 3, tags: ['a'] }, count: 7, nothing: null },
  };
  const step = (concurrency: ConcurrencyKey[]) =>
    ({ ...normaliseSteps([capability('a')])[0]!, concurrency }) as StepDefinition;

  it('names one pool per value: input strings as they are, other input values as JSON text', () => {
    const held = resolveConcurrencyKeys(
      step([
        { key: 'customer', value: '$.input.customer.id', limit: 3 },
        { key: 'tier', value: '$.input.customer.tier', limit: 1 },
        { key: 'count', value: '$.input.count', limit: 1 },
        { key: 'tags', value: '$.input.customer.tags', limit: 1 },
        { key: 'nothing', value: '$.input.nothing', limit: 1 },
        { key: 'absent', value: '$.input.customer.missing', limit: 1 },
      ]),
      task,
    );
    expect(held.map((k) => k.value)).toEqual(['c-42', '3', '7', '["a"]', 'null', '']);
    expect(held[0]).toEqual({ name: 'customer', value: 'c-42', declaredLimit: 3 });
  });

  it('reads the tenant, the application, the owner and literals, and one pool for a key without a value', () => {
    const keys = step([
      { key: 't', value: '$.tenant', limit: 1 },
      { key: 'a', value: '$.application', limit: 2 },
      { key: 'o', value: '$.owner', limit: 5 },
      { key: 'l', value: 'exports', limit: 3 },
      { key: 'whole', limit: 4 },
    ]);
    expect(resolveConcurrencyKeys(keys, task)).toEqual([
      { name: 't', value: 'tenant-1', declaredLimit: 1 },
      { name: 'a', value: 'application-1', declaredLimit: 2 },
      { name: 'o', value: 'owner-7', declaredLimit: 5 },
      { name: 'l', value: 'exports', declaredLimit: 3 },
      { name: 'whole', value: '', declaredLimit: 4 },
    ]);
    // Tasks created without an owner share one pool of the owner key.
    expect(resolveConcurrencyKeys(keys, { ...task, ownerId: null })[2]).toEqual({
      name: 'o',
      value: '',
      declaredLimit: 5,
    });
  });

  it('holds nothing for a step without keys', () => {
    expect(resolveConcurrencyKeys(normaliseSteps([capability('a')])[0]!, task)).toEqual([]);
  });
});

describe('heldKeyReason', () => {
  it('names the pool and its count, or that it is paused', () => {
    expect(heldKeyReason({ name: 'customer', value: '42' }, 3, 3, false)).toBe(
      'customer 42 at its limit 3/3',
    );
    expect(heldKeyReason({ name: 'customer', value: '42' }, 3, 5, true)).toBe('customer 42 paused');
    expect(heldKeyReason({ name: 'export', value: '' }, 1, 1, false)).toBe('export at its limit 1/1');
    expect(heldKeyReason({ name: 'export', value: '' }, 0, 1, true)).toBe('export paused');
  });
});

/**
 * Concurrency keys at publish, through the HTTP API: declared keys are stored on each capability step;
 * a key TDP could not honour is a 4xx problem naming it, and nothing is stored.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Harness, startHarness } from '../../../test/harness.ts';

let h: Harness;
let app: Awaited<ReturnType<Harness['createApplication']>>;

beforeAll(async () => {
  h = await startHarness();
  app = await h.createApplication();
});
afterAll(() => h.close());

const publish = (body: unknown) => h.request('POST', '/v1/workflow-definitions', { token: app.apiKey, body });
const read = (name: string) =>
  h.request('GET', `/v1/workflow-definitions/${name}/versions/1`, { token: app.apiKey });

const inputSchema = {
  type: 'object',
  required: ['customerId'],
  properties: { customerId: { type: 'string' }, region: { type: 'string' } },
};
const work = (key: string, extra: Record<string, unknown> = {}) => ({
  key,
  capability: `cap.${key}`,
  capabilityVersion: '1',
  ...extra,
});

describe('publishing concurrency keys', () => {
  it('stores the workflow’s keys, then the step’s own, on each capability step and on no other', async () => {
    const customer = { key: 'customer', value: '$.input.customerId', limit: 3 };
    const exports = { key: 'exports', limit: 1 };
    const created = await publish({
      name: 'keys-ok',
      version: '1',
      inputSchema,
      concurrency: [customer],
      steps: [
        work('fetch'),
        { key: 'pause', kind: 'sleep', sleep: { durationMs: 1000 }, dependsOn: ['fetch'] },
        work('export', { dependsOn: ['pause'], concurrency: [exports] }),
      ],
    });
    expect(created.status).toBe(201);
    const stored = await read('keys-ok');
    expect(stored.status).toBe(200);
    expect(stored.body.steps.map((s: { concurrency?: unknown }) => s.concurrency)).toEqual([
      [customer],
      undefined,
      [customer, exports],
    ]);
    // The same content again is the same definition (the keys are part of it).
    const again = await publish({
      name: 'keys-ok',
      version: '1',
      inputSchema,
      concurrency: [customer],
      steps: [
        work('fetch'),
        { key: 'pause', kind: 'sleep', sleep: { durationMs: 1000 }, dependsOn: ['fetch'] },
        work('export', { dependsOn: ['pause'], concurrency: [exports] }),
      ],
    });
    expect(again.status).toBe(200);
  });

  it('rejects a limit of 0 or below by schema, storing nothing', async () => {
    for (const [index, limit] of [0, -1].entries()) {
      const name = `keys-limit-${index}`;
      for (const body of [
        { name, version: '1', concurrency: [{ key: 'k', limit }], steps: [work('a')] },
        { name, version: '1', steps: [work('a', { concurrency: [{ key: 'k', limit }] })] },
      ]) {
        const res = await publish(body);
        expect(res.status).toBe(400);
        expect(res.headers.get('content-type')).toContain('application/problem+json');
        expect(res.body.code).toBe('VALIDATION_FAILED');
      }
      expect((await read(name)).status).toBe(404);
    }
  });

  it.each([
    [
      'an input path the inputSchema does not guarantee',
      { steps: [work('a', { concurrency: [{ key: 'region', value: '$.input.region', limit: 2 }] })] },
      'concurrency key region: the inputSchema does not guarantee $.input.region (make it required)',
    ],
    [
      'a $. reference TDP cannot read',
      { steps: [work('a', { concurrency: [{ key: 'k', value: '$.steps.a.output', limit: 2 }] })] },
      'concurrency key k: value $.steps.a.output is not $.input.<path>, $.tenant, $.application, $.owner or a literal',
    ],
    [
      'keys on a step that runs nothing on workers',
      {
        steps: [
          work('a'),
          { key: 'nap', kind: 'sleep', sleep: { durationMs: 10 }, concurrency: [{ key: 'k', limit: 1 }] },
        ],
      },
      'step nap: only a capability or map step holds concurrency keys',
    ],
    [
      'the same key twice on a step',
      {
        steps: [
          work('a', {
            concurrency: [
              { key: 'k', value: 'x', limit: 1 },
              { key: 'k', value: 'y', limit: 1 },
            ],
          }),
        ],
      },
      'step a names concurrency key k twice',
    ],
    [
      'one key name with two limits',
      {
        steps: [
          work('a', { concurrency: [{ key: 'k', limit: 1 }] }),
          work('b', { concurrency: [{ key: 'k', limit: 2 }] }),
        ],
      },
      'concurrency key k is declared with limits 1 and 2; a key has one limit',
    ],
  ])('rejects %s with a 422 naming it, storing nothing', async (_case, partial, message) => {
    const res = await publish({ name: 'keys-bad', version: '1', inputSchema, ...partial });
    expect(res.status).toBe(422);
    expect(res.headers.get('content-type')).toContain('application/problem+json');
    expect(res.body.code).toBe('WORKFLOW_DEFINITION_INVALID');
    expect(res.body.errors.map((e: { message: string }) => e.message)).toEqual([message]);
    expect((await read('keys-bad')).status).toBe(404);
  });

  it('reports a bad key of the workflow once, at the workflow’s concurrency', async () => {
    const res = await publish({
      name: 'keys-workflow-bad',
      version: '1',
      inputSchema,
      concurrency: [{ key: 'region', value: '$.input.region', limit: 2 }],
      steps: [work('a'), work('b', { dependsOn: ['a'] })],
    });
    expect(res.status).toBe(422);
    expect(res.body.code).toBe('WORKFLOW_DEFINITION_INVALID');
    expect(res.body.errors).toEqual([
      {
        path: '/concurrency/0',
        message:
          'concurrency key region: the inputSchema does not guarantee $.input.region (make it required)',
      },
    ]);
    expect((await read('keys-workflow-bad')).status).toBe(404);
  });
});

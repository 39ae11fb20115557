import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Harness, startHarness, zipWorkflow } from '../../../test/harness.ts';

let h: Harness;
let app: Awaited<ReturnType<Harness['createApplication']>>;

beforeAll(async () => {
  h = await startHarness();
  app = await h.createApplication();
});
afterAll(() => h.close());

const publish = (body: unknown) => h.request('POST', '/v1/workflow-definitions', { token: app.apiKey, body });

describe('workflow definitions', () => {
  it('publishes, reads and lists a definition with its defaults filled in', async () => {
    const created = await publish(zipWorkflow('wf-a', '1'));
    expect(created.status).toBe(201);
    expect(created.body.steps[1]).toMatchObject({
      key: 'watermark',
      dependsOn: ['clean'],
      failurePolicy: 'FAIL_TASK',
      retry: { maxAttempts: 3 },
    });
    const read = await h.request('GET', '/v1/workflow-definitions/wf-a/versions/1', { token: app.apiKey });
    // The publish's answer is the stored definition and its warnings (no worker is registered here).
    const { warnings, ...stored } = created.body;
    expect(warnings.map((w: { stepKey: string }) => w.stepKey)).toEqual(['clean', 'watermark']);
    expect(read.body).toEqual(stored);
    await publish(zipWorkflow('wf-a', '2'));
    const list = await h.request('GET', '/v1/workflow-definitions?name=wf-a', { token: app.apiKey });
    expect(list.body.items.map((d: any) => d.version)).toEqual(['1', '2']);
  });

  it('is immutable: identical content replays, different content conflicts', async () => {
    await publish(zipWorkflow('wf-b', '1'));
    const again = await publish(zipWorkflow('wf-b', '1'));
    expect(again.status).toBe(200);
    const changed = zipWorkflow('wf-b', '1');
    changed.steps[1]!.capabilityVersion = '3';
    const conflict = await publish(changed);
    expect(conflict.status).toBe(409);
    expect(conflict.body.code).toBe('WORKFLOW_VERSION_EXISTS');
    const read = await h.request('GET', '/v1/workflow-definitions/wf-b/versions/1', { token: app.apiKey });
    expect(read.body.steps[1].capabilityVersion).toBe('2');
  });

  it.each([
    [
      'a cycle',
      {
        steps: [
          { key: 'clean', capability: 'a', capabilityVersion: '1', dependsOn: ['watermark'] },
          { key: 'watermark', capability: 'b', capabilityVersion: '1', dependsOn: ['clean'] },
        ],
      },
      'dependency cycle: clean -> watermark -> clean',
    ],
    [
      'an unknown dependency',
      { steps: [{ key: 'watermark', capability: 'b', capabilityVersion: '1', dependsOn: ['clean'] }] },
      'step "watermark" depends on "clean", which is not a step of this workflow',
    ],
    [
      'a duplicate key',
      {
        steps: [
          { key: 'a', capability: 'b', capabilityVersion: '1' },
          { key: 'a', capability: 'c', capabilityVersion: '1' },
        ],
      },
      'step key "a" is already used by step 0',
    ],
    [
      'a mapping from a non-upstream step',
      {
        steps: [
          { key: 'a', capability: 'b', capabilityVersion: '1', inputMapping: { x: '$.steps.b.output' } },
          { key: 'b', capability: 'c', capabilityVersion: '1' },
        ],
      },
      'step "a" reads the output of "b", which is not upstream of it (add it to dependsOn)',
    ],
    [
      'an invalid input schema',
      { inputSchema: { type: 'strng' }, steps: [{ key: 'a', capability: 'b', capabilityVersion: '1' }] },
      'schema must be equal to one of the allowed values',
    ],
  ])('rejects %s with a 422 naming the problem', async (_name, partial, message) => {
    const res = await publish({ name: 'wf-bad', version: '1', ...partial });
    expect(res.status).toBe(422);
    expect(res.body.code).toBe('WORKFLOW_DEFINITION_INVALID');
    expect(res.body.errors.map((e: any) => e.message)).toContain(message);
    expect(
      (await h.request('GET', '/v1/workflow-definitions/wf-bad/versions/1', { token: app.apiKey })).status,
    ).toBe(404);
  });

  it('rejects missing capability fields (a capability step needs both) and empty step lists', async () => {
    const noVersion = await publish({ name: 'wf-c', version: '1', steps: [{ key: 'a', capability: 'b' }] });
    expect(noVersion.status).toBe(422);
    expect(noVersion.body.errors[0]).toEqual({
      path: '/steps/0/capabilityVersion',
      message: 'capabilityVersion is required',
    });
    expect((await publish({ name: 'wf-c', version: '1', steps: [] })).status).toBe(400);
    expect(
      (
        await publish({
          name: 'wf-c',
          version: '1',
          steps: [{ key: '', capability: 'b', capabilityVersion: '1' }],
        })
      ).status,
    ).toBe(400);
  });

  it('answers 404 problem for an unknown version', async () => {
    const res = await h.request('GET', '/v1/workflow-definitions/none/versions/1', { token: app.apiKey });
    expect(res.status).toBe(404);
    expect(res.body.code).toBe('WORKFLOW_DEFINITION_NOT_FOUND');
  });
});

/** A `.map()` step of defineWorkflow() is the map step the server publishes (docs/step-kinds.md#map). */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { type Harness, startHarness } from '../../../test/harness.ts';
import { createTdpClient, defineWorkflow, type TdpClient } from '../src/index.ts';

let h: Harness;
let tdp: TdpClient;

beforeAll(async () => {
  h = await startHarness();
  const app = await h.createApplication();
  tdp = createTdpClient({ baseUrl: h.url, apiKey: app.apiKey, timeoutMs: 5_000 });
});
afterAll(() => h.close());

it('publishes a map step with its items, capability, mapping and settings', async () => {
  const workflow = defineWorkflow({ name: 'sdk-map', version: '1' })
    .step('list', { capability: 'nobody.list', capabilityVersion: '1' })
    .map('each', {
      dependsOn: ['list'],
      items: '$.steps.list.output.files',
      capability: 'nobody.scan',
      capabilityVersion: '2',
      inputMapping: { path: '$.item.path', label: { from: '$.input.label', default: 'none' } },
      maxParallel: 3,
      onItemFailure: 'CONTINUE',
      retry: { maxAttempts: 2 },
    });

  const { definition } = await tdp.publishWorkflowDefinition(workflow);
  const each = definition.steps.find((s) => s.key === 'each');
  expect(each).toMatchObject({
    kind: 'map',
    dependsOn: ['list'],
    capability: 'nobody.scan',
    capabilityVersion: '2',
    map: {
      items: '$.steps.list.output.files',
      capability: 'nobody.scan',
      capabilityVersion: '2',
      inputMapping: { path: '$.item.path', label: { from: '$.input.label', default: 'none' } },
      maxParallel: 3,
      onItemFailure: 'CONTINUE',
    },
  });
  expect(each?.retry.maxAttempts).toBe(2);
});

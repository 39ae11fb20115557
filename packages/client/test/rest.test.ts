/** The REST client against a real server: tasks with an API key, the person's view with a user token. */
import { newId } from '@tdp/protocol';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Harness, startHarness } from '../../../test/harness.ts';
import { TdpClient, TdpError } from '../src/index.ts';

let h: Harness;
let backend: TdpClient;

beforeAll(async () => {
  h = await startHarness();
  const app = await h.createApplication();
  backend = new TdpClient({ baseUrl: h.url, token: app.apiKey });
  await h.request('POST', '/v1/workflow-definitions', {
    token: app.apiKey,
    body: {
      name: 'rest',
      version: '1',
      steps: [{ key: 'only', capability: 'nobody.rest', capabilityVersion: '1' }],
    },
  });
});
afterAll(() => h.close());

describe('TdpClient', () => {
  it('creates a task once per idempotency key, reads and cancels it', async () => {
    const key = newId();
    const request = { workflowName: 'rest', workflowVersion: '1', name: 'by the client', ownerId: 'r1' };
    const created = await backend.createTask(key, request);
    const replayed = await backend.createTask(key, request);
    expect(replayed.task.id).toBe(created.task.id);
    expect((await backend.getTask(created.task.id)).task.name).toBe('by the client');
    await backend.cancelTask(created.task.id, 'changed my mind');
    expect((await backend.getTask(created.task.id)).task.lifecycleStatus).toBe('CANCELLED');
  });

  it('turns problems into TdpError with their code', async () => {
    const error = await backend
      .createTask(newId(), { workflowName: 'missing', workflowVersion: '1', name: 'x' })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(TdpError);
    expect(error).toMatchObject({ status: 422, code: 'UNKNOWN_WORKFLOW', retryable: false });
    await expect(backend.getTask(newId())).rejects.toMatchObject({ status: 404, code: 'TASK_NOT_FOUND' });
  });

  it("gives a user's page its tasks, snapshots and realtime tokens", async () => {
    const created = await backend.createTask(newId(), {
      workflowName: 'rest',
      workflowVersion: '1',
      name: 'mine',
      ownerId: 'r2',
    });
    const page = new TdpClient({ baseUrl: h.url, token: (await backend.userToken('r2')).token });
    expect((await page.myTasks()).items.map((t) => t.taskId)).toEqual([created.task.id]);
    const [item] = (await page.batchGet([{ taskId: created.task.id }])).items;
    expect(item).toMatchObject({ found: true, changed: true, taskId: created.task.id });
    const connection = await backend.connectionToken('r2');
    expect(connection.url).toMatch(/^ws:\/\/.+\/connection\/websocket$/);
    const subscription = await backend.subscriptionToken('r2', created.task.id);
    expect(subscription.channel).toContain(created.task.id);
    await expect(backend.subscriptionToken('not-r2', created.task.id)).rejects.toMatchObject({
      code: 'TASK_NOT_FOUND',
    });
  });
});

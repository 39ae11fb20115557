/**
 * The store wired as docs/realtime.md shows it, against a real server: its snapshot is the person's
 * `GET /v1/me/tasks` (through `TdpUserClient.myTasks()`), taken as it comes, and live summaries land on top.
 */
import { createTdpClient, type TdpClient } from '@tdp/sdk';
import { Centrifuge } from 'centrifuge';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { type Harness, startHarness } from '../../../test/harness.ts';
import { bindTaskStore, TaskStore, TdpUserClient } from '../src/index.ts';

let h: Harness;
let backend: TdpClient;

beforeAll(async () => {
  // The loops publish a commit's realtime messages (the hand-off) as a deployed server does.
  h = await startHarness({ runLoops: true });
  const app = await h.createApplication();
  backend = createTdpClient({ baseUrl: h.url, apiKey: app.apiKey });
  await h.request('POST', '/v1/workflow-definitions', {
    token: app.apiKey,
    body: {
      name: 'snapshot',
      version: '1',
      steps: [{ key: 'only', capability: 'nobody.snapshot', capabilityVersion: '1' }],
    },
  });
});
afterAll(() => h.close());

const createFor = async (ownerId: string, name: string) =>
  (await backend.createTask({ workflowName: 'snapshot', workflowVersion: '1', name, ownerId })).task;

describe('the task store on a real server', () => {
  it('lists the tasks that existed before the page loaded, from myTasks() as it comes, and live changes on top', async () => {
    const first = await createFor('page-user', 'first');
    const second = await createFor('page-user', 'second');
    await createFor('someone-else', 'not mine');

    const reader = new TdpUserClient({
      baseUrl: h.url,
      token: (await backend.createUserToken({ userId: 'page-user' })).token,
    });
    const { token, url } = await backend.createConnectionToken('page-user');
    const centrifuge = new Centrifuge(url, { websocket: WebSocket, token });
    const store = new TaskStore();
    const live = bindTaskStore({
      centrifuge,
      store,
      loadTasks: async () => (await reader.myTasks()).items,
    });
    centrifuge.connect();
    try {
      await expect.poll(() => store.connection).toBe('LIVE');
      expect(store.myTasks().map((t) => t.taskId)).toEqual([second.id, first.id]);
      expect(store.summary(first.id)).toMatchObject({
        kind: 'task.summary',
        title: 'first',
        lifecycleStatus: first.lifecycleStatus,
        startedAt: null,
      });

      // A change while the page is open comes over realtime and replaces the listed summary.
      await backend.cancelTask(first.id);
      await expect.poll(() => store.summary(first.id)?.lifecycleStatus).toBe('CANCELLED');
      expect(store.summary(first.id)?.finishedAt).not.toBeNull();
      expect(store.myTasks()).toHaveLength(2);
    } finally {
      live.close();
      centrifuge.disconnect();
    }
  });
});

/**
 * The page's REST client against a real server, with the user token its backend (`@tdp/sdk`) minted:
 * the person's tasks and snapshots. Backend calls are `@tdp/sdk`'s alone: one `TdpClient`.
 */
import { newId } from '@tdp/protocol';
import { createTdpClient, type TdpClient } from '@tdp/sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Harness, startHarness } from '../../../test/harness.ts';
import * as client from '../src/index.ts';
import { TdpError, TdpUserClient } from '../src/index.ts';

let h: Harness;
let backend: TdpClient;

beforeAll(async () => {
  h = await startHarness();
  const app = await h.createApplication();
  backend = createTdpClient({ baseUrl: h.url, apiKey: app.apiKey });
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

const pageOf = async (userId: string) =>
  new TdpUserClient({ baseUrl: h.url, token: (await backend.createUserToken({ userId })).token });

describe('TdpUserClient', () => {
  it("gives a user's page its tasks and snapshots", async () => {
    const created = await backend.createTask({
      workflowName: 'rest',
      workflowVersion: '1',
      name: 'mine',
      ownerId: 'r2',
    });
    const page = await pageOf('r2');
    expect((await page.myTasks()).items.map((t) => t.taskId)).toEqual([created.task.id]);
    const [item] = (await page.batchGet([{ taskId: created.task.id }])).items;
    expect(item).toMatchObject({ found: true, changed: true, taskId: created.task.id });
  });

  it('turns problems into TdpError with their code', async () => {
    const page = await pageOf('stranger');
    const error = await page.markNotificationRead(newId()).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(TdpError);
    expect(error).toMatchObject({ status: 404, code: 'NOTIFICATION_NOT_FOUND', retryable: false });
  });

  it('is the only REST client here: the backend TdpClient (createTask, tokens) is @tdp/sdk alone', () => {
    expect(Object.keys(client)).not.toContain('TdpClient');
    const methods = Object.getOwnPropertyNames(TdpUserClient.prototype);
    for (const backendCall of [
      'createTask',
      'getTask',
      'cancelTask',
      'connectionToken',
      'subscriptionToken',
      'userToken',
    ])
      expect(methods).not.toContain(backendCall);
  });
});

/**
 * Live status end to end: the server's in-process gateway, the relay from `realtime_outbox`, and the
 * token endpoints, driven by the real `centrifuge` SDK.
 */
import { newId } from '@tdp/protocol';
import { Centrifuge } from 'centrifuge';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { publishLiveWorkflow } from '../../../test/fixtures.ts';
import { type Harness, startHarness } from '../../../test/harness.ts';

let h: Harness;
let app: Awaited<ReturnType<Harness['createApplication']>>;
const clients: Centrifuge[] = [];
let createTask: (ownerId: string) => Promise<string>;

beforeAll(async () => {
  h = await startHarness({ runLoops: true });
  app = await h.createApplication();
  createTask = await publishLiveWorkflow(h, app.apiKey, newId);
});
afterAll(async () => {
  for (const client of clients) client.disconnect();
  await h.close();
});

const token = async (path: string, body: Record<string, unknown>, apiKey = app.apiKey) =>
  h.request('POST', path, { token: apiKey, body });

async function connectAs(userId: string) {
  const issued = (await token('/v1/realtime/connection-token', { userId })).body;
  const client = new Centrifuge(issued.url, { websocket: WebSocket, token: issued.token });
  clients.push(client);
  const connected = new Promise((resolve) => client.once('connected', resolve));
  client.connect();
  await connected;
  return { client, channels: issued.channels as string[] };
}

describe('live status through the gateway', () => {
  it("a user's connection sees their new task appear, and its detail channel follows every change", async () => {
    const { client, channels } = await connectAs('u1');
    expect(channels).toEqual([
      `task_user:${app.tenantId}/${app.applicationId}/u1`,
      `task_tenant:${app.tenantId}`,
      'task_system:public',
    ]);
    const summaries: { taskId: string; lifecycleStatus: string }[] = [];
    client.on('publication', (ctx) => summaries.push(ctx.data));
    const taskId = await createTask('u1');
    await expect.poll(() => summaries.some((s) => s.taskId === taskId)).toBe(true);

    const issued = (await token('/v1/realtime/subscription-token', { userId: 'u1', taskId })).body;
    expect(issued.channel).toBe(`task_detail:${app.tenantId}/${taskId}`);
    const detail = client.newSubscription(issued.channel, { token: issued.token });
    const details: { kind: string; state: { lifecycleStatus: string } }[] = [];
    detail.on('publication', (ctx) => details.push(ctx.data));
    const subscribed = new Promise((resolve) => detail.once('subscribed', resolve));
    detail.subscribe();
    await subscribed;
    await h.request('POST', `/v1/tasks/${taskId}:cancel`, { token: app.apiKey });
    await expect.poll(() => details.at(-1)?.state.lifecycleStatus, { timeout: 10_000 }).toBe('CANCELLED');
    await expect
      .poll(() => summaries.filter((s) => s.taskId === taskId).at(-1)?.lifecycleStatus)
      .toBe('CANCELLED');
  });

  it("refuses a subscription token for someone else's task, and for another application's", async () => {
    const taskId = await createTask('owner-1');
    const stranger = await token('/v1/realtime/subscription-token', { userId: 'stranger', taskId });
    expect(stranger.status).toBe(404);
    expect(stranger.body.code).toBe('TASK_NOT_FOUND');
    const other = await h.createApplication();
    const foreign = await token(
      '/v1/realtime/subscription-token',
      { userId: 'owner-1', taskId },
      other.apiKey,
    );
    expect(foreign.status).toBe(404);
    const owner = await token('/v1/realtime/subscription-token', { userId: 'owner-1', taskId });
    expect(owner.status).toBe(200);
  });

  it('a connection follows at most 20 task details: the token endpoint answers DETAIL_SUBSCRIPTION_LIMIT, the gateway 106', async () => {
    const { client } = await connectAs('u-limit');
    const clientId = await new Promise<string>((resolve) => {
      if (client.state === 'connected') resolve((client as unknown as { _client: string })._client);
      client.once('connected', (ctx) => resolve(ctx.client));
    });
    const taskIds = [];
    for (let i = 0; i < 21; i += 1) taskIds.push(await createTask('u-limit'));
    for (const taskId of taskIds.slice(0, 20)) {
      const issued = await token('/v1/realtime/subscription-token', { userId: 'u-limit', taskId, clientId });
      expect(issued.status).toBe(200);
      const sub = client.newSubscription(issued.body.channel, { token: issued.body.token });
      const subscribed = new Promise((resolve) => sub.once('subscribed', resolve));
      sub.subscribe();
      await subscribed;
    }
    const refused = await token('/v1/realtime/subscription-token', {
      userId: 'u-limit',
      taskId: taskIds[20],
      clientId,
    });
    expect(refused.status).toBe(409);
    expect(refused.body.code).toBe('DETAIL_SUBSCRIPTION_LIMIT');
    // A token got without saying which connection it is for still meets the gateway's limit.
    const unchecked = await token('/v1/realtime/subscription-token', {
      userId: 'u-limit',
      taskId: taskIds[20],
    });
    const sub = client.newSubscription(unchecked.body.channel, { token: unchecked.body.token });
    const outcome = new Promise<number>((resolve) => sub.once('unsubscribed', (ctx) => resolve(ctx.code)));
    sub.subscribe();
    expect(await outcome).toBe(106);
  });

  it("a user's connection cannot follow the operators' channel of every task", async () => {
    const { client } = await connectAs('u-curious');
    const sub = client.newSubscription('task_ops:all');
    const outcome = new Promise<number>((resolve) => sub.once('unsubscribed', (ctx) => resolve(ctx.code)));
    sub.subscribe();
    expect(await outcome).toBe(103);
  });
});

/**
 * TDP with a real Centrifugo v6 between the relay and the browsers (docs/realtime.md, "Moving to
 * Centrifugo"): Centrifugo runs with the config `centrifugoConfig` makes, the relay publishes through
 * its HTTP API (CENTRIFUGO_API_URL), and the official `centrifuge` SDK connects to it with the tokens
 * TDP's endpoints mint (signed with TDP_REALTIME_TOKEN_SECRET, Centrifugo's hmac_secret_key). A
 * network cut, and a move to another node on the Redis engine, lose nothing the history holds.
 */
import { randomBytes } from 'node:crypto';
import { newId } from '@tdp/protocol';
import { Centrifuge, type Subscription } from 'centrifuge';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import {
  type CentrifugoProcess,
  centrifugoMode,
  newTokenSecret,
  requireCentrifugo,
  startCentrifugo,
} from '../../../test/centrifugo.ts';
import { publishLiveWorkflow } from '../../../test/fixtures.ts';
import { startHarness } from '../../../test/harness.ts';
import { TcpProxy } from '../../../test/tcpProxy.ts';
import { CentrifugoApiPublisher } from '../src/adapters/outbound/realtime/publishers.ts';

const binary = requireCentrifugo();
const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';

interface Summary {
  taskId: string;
  lifecycleStatus: string;
}
interface Detail {
  kind: string;
  state: { lifecycleStatus: string };
}

/** One TDP server publishing to Centrifugo (node `publishTo`), its tokens handed out for `wsUrl`. */
async function startTdp(publishTo: CentrifugoProcess, tokenSecret: string, wsUrl: string) {
  const h = await startHarness({
    runLoops: true,
    ...centrifugoMode(publishTo, tokenSecret, wsUrl),
  });
  const app = await h.createApplication();
  const createTask = await publishLiveWorkflow(h, app.apiKey, newId);
  const cancel = (taskId: string) => h.request('POST', `/v1/tasks/${taskId}:cancel`, { token: app.apiKey });
  const tokenFor = async (path: string, body: Record<string, unknown>) => {
    const issued = await h.request('POST', path, { token: app.apiKey, body });
    if (issued.status !== 200) throw new Error(`${path}: ${issued.status} ${JSON.stringify(issued.body)}`);
    return issued.body;
  };
  return { h, app, createTask, cancel, tokenFor };
}
type Tdp = Awaited<ReturnType<typeof startTdp>>;

const clients: Centrifuge[] = [];

/** The SDK as a page uses it: a connection token from TDP, its user channel subscribed server-side. */
async function connectAs(tdp: Tdp, userId: string) {
  const issued = await tdp.tokenFor('/v1/realtime/connection-token', { userId });
  const client = new Centrifuge(issued.url, {
    websocket: WebSocket,
    getToken: async () => (await tdp.tokenFor('/v1/realtime/connection-token', { userId })).token,
    minReconnectDelay: 50,
    maxReconnectDelay: 300,
  });
  clients.push(client);
  const summaries: Summary[] = [];
  client.on('publication', (ctx) => summaries.push(ctx.data));
  // Detail tokens name the connection (TDP keeps it to 20 details); a reconnection gets a new id.
  let clientId = '';
  client.on('connected', (ctx) => {
    clientId = ctx.client;
  });
  const outcome = new Promise<void>((resolve, reject) => {
    client.once('connected', () => resolve());
    client.once('disconnected', (ctx) => reject(new Error(`Centrifugo refused: ${ctx.code} ${ctx.reason}`)));
  });
  client.connect();
  await outcome;
  return { client, summaries, channels: issued.channels as string[], clientId: () => clientId };
}

/** A detail subscription with a token from TDP's subscription-token endpoint. */
async function followDetail(
  tdp: Tdp,
  { client, clientId }: { client: Centrifuge; clientId: () => string },
  userId: string,
  taskId: string,
) {
  const token = () =>
    tdp.tokenFor('/v1/realtime/subscription-token', { userId, taskId, clientId: clientId() });
  const { channel } = await token();
  const subscription: Subscription = client.newSubscription(channel, {
    getToken: async () => (await token()).token,
  });
  const details: Detail[] = [];
  subscription.on('publication', (ctx) => details.push(ctx.data));
  const subscribed = new Promise((resolve) => subscription.once('subscribed', resolve));
  subscription.subscribe();
  await subscribed;
  return { subscription, details, channel };
}

afterAll(() => {
  for (const client of clients) client.disconnect();
});

describe.skipIf(!binary)('TDP with a real Centrifugo', () => {
  const tokenSecret = newTokenSecret();
  let centrifugo: CentrifugoProcess;
  let proxy: TcpProxy;
  let tdp: Tdp;

  beforeAll(async () => {
    centrifugo = await startCentrifugo({ binary: binary!, tokenSecret });
    // The SDK reaches Centrifugo through a proxy the test can cut.
    proxy = new TcpProxy('127.0.0.1', Number(new URL(centrifugo.url).port));
    await proxy.start();
    tdp = await startTdp(centrifugo, tokenSecret, `ws://127.0.0.1:${proxy.port}/connection/websocket`);
  });
  afterAll(async () => {
    await tdp?.h.close();
    await proxy?.cut();
    await centrifugo?.stop();
  });

  it('the relay publishes through its HTTP API: a user sees a new task on their channel, and the detail they follow changes', async () => {
    const { client, summaries, channels, clientId } = await connectAs(tdp, 'u1');
    expect(channels).toContain(`task_user:${tdp.app.tenantId}/${tdp.app.applicationId}/u1`);
    const taskId = await tdp.createTask('u1');
    await expect.poll(() => summaries.some((s) => s.taskId === taskId)).toBe(true);

    const { details, channel } = await followDetail(tdp, { client, clientId }, 'u1', taskId);
    expect(channel).toBe(`task_detail:${tdp.app.tenantId}/${taskId}`);
    await tdp.cancel(taskId);
    await expect.poll(() => details.at(-1)?.state.lifecycleStatus, { timeout: 10_000 }).toBe('CANCELLED');
    await expect
      .poll(() => summaries.filter((s) => s.taskId === taskId).at(-1)?.lifecycleStatus)
      .toBe('CANCELLED');
    // Every realtime row of the task is marked published: Centrifugo's API answered each publication.
    const unpublished = async () =>
      (
        await tdp.h.server.sql`
          SELECT count(*)::int AS n FROM realtime_message WHERE aggregate_id = ${taskId} AND status <> 'PUBLISHED'`
      )[0]!.n;
    await expect.poll(unpublished).toBe(0);
  });

  it('a batch the relay sends again (the first answer lost) publishes nothing twice: message ids are idempotency keys', async () => {
    const { summaries, channels } = await connectAs(tdp, 'u-again');
    const publisher = new CentrifugoApiPublisher(centrifugo.apiUrl, centrifugo.apiKey);
    const channel = channels[0]!;
    const message = (id: string, taskId: string) => ({
      id,
      channel,
      data: { taskId, lifecycleStatus: 'RUNNING' },
    });
    const [first, second] = [newId(), newId()];
    expect(await publisher.publish([message(first, 'a')])).toEqual([{ ok: true }]);
    expect(await publisher.publish([message(first, 'a'), message(second, 'b')])).toEqual([
      { ok: true },
      { ok: true },
    ]);
    await expect.poll(() => summaries.map((s) => s.taskId)).toEqual(['a', 'b']);
  });

  it('the namespaces open no channel to a client without a token: a tokenless detail subscription is refused', async () => {
    const { client } = await connectAs(tdp, 'u-curious');
    const taskId = await tdp.createTask('someone-else');
    const refused = client.newSubscription(`task_detail:${tdp.app.tenantId}/${taskId}`);
    const outcome = new Promise<number>((resolve) =>
      refused.once('unsubscribed', (ctx) => resolve(ctx.code)),
    );
    refused.subscribe();
    expect(await outcome).toBe(103);
  });

  it('after a network cut, the SDK reconnects and recovers what was published meanwhile, on both channels', async () => {
    const { client, summaries, clientId } = await connectAs(tdp, 'u-cut');
    const followed = await tdp.createTask('u-cut');
    const { subscription, details } = await followDetail(tdp, { client, clientId }, 'u-cut', followed);
    await expect.poll(() => summaries.some((s) => s.taskId === followed)).toBe(true);

    const connecting = new Promise((resolve) => client.once('connecting', resolve));
    await proxy.cut();
    await connecting;
    // While the page is away: a new task of its user, and the followed task cancelled.
    const created = await tdp.createTask('u-cut');
    await tdp.cancel(followed);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(summaries.some((s) => s.taskId === created)).toBe(false);

    const userRecovered = new Promise<{ recovered: boolean; wasRecovering: boolean }>((resolve) =>
      client.once('subscribed', resolve),
    );
    const detailRecovered = new Promise<{ recovered: boolean; wasRecovering: boolean }>((resolve) =>
      subscription.once('subscribed', resolve),
    );
    await proxy.restore();
    expect(await userRecovered).toMatchObject({ wasRecovering: true, recovered: true });
    expect(await detailRecovered).toMatchObject({ wasRecovering: true, recovered: true });
    await expect.poll(() => summaries.some((s) => s.taskId === created)).toBe(true);
    await expect.poll(() => details.at(-1)?.state.lifecycleStatus).toBe('CANCELLED');
  });
});

describe.skipIf(!binary)('two Centrifugo nodes on the Redis engine', () => {
  const tokenSecret = newTokenSecret();
  // A prefix of this run's own, removed at the end: the nodes share nothing with anything else in Redis.
  const redis = { url: redisUrl, prefix: `tdp-test-${randomBytes(6).toString('hex')}` };
  let nodes: CentrifugoProcess[] = [];
  let proxy: TcpProxy;
  let tdp: Tdp;

  beforeAll(async () => {
    nodes = await Promise.all([1, 2].map(() => startCentrifugo({ binary: binary!, tokenSecret, redis })));
    proxy = new TcpProxy('127.0.0.1', Number(new URL(nodes[1]!.url).port));
    await proxy.start();
    // TDP publishes to node 1; its pages connect to node 2 (through the proxy).
    tdp = await startTdp(nodes[0]!, tokenSecret, `ws://127.0.0.1:${proxy.port}/connection/websocket`);
  });
  afterAll(async () => {
    await tdp?.h.close();
    await proxy?.cut();
    await Promise.all(nodes.map((node) => node.stop()));
    const client = new Redis(redisUrl);
    try {
      const keys = await client.keys(`${redis.prefix}*`);
      if (keys.length > 0) await client.del(...keys);
    } finally {
      client.disconnect();
    }
  });

  it('what TDP publishes to one node reaches a page on the other, and a page that moves nodes recovers from Redis', async () => {
    const { client, summaries, clientId } = await connectAs(tdp, 'u-nodes');
    const taskId = await tdp.createTask('u-nodes');
    await expect.poll(() => summaries.some((s) => s.taskId === taskId)).toBe(true);
    const { subscription, details } = await followDetail(tdp, { client, clientId }, 'u-nodes', taskId);

    // Node 2 goes out of reach; the page's address now leads to node 1, which it has never seen.
    const port = proxy.port;
    const connecting = new Promise((resolve) => client.once('connecting', resolve));
    await proxy.cut();
    await connecting;
    const created = await tdp.createTask('u-nodes');
    await tdp.cancel(taskId);
    proxy = new TcpProxy('127.0.0.1', Number(new URL(nodes[0]!.url).port));
    const recovered = new Promise((resolve) => subscription.once('subscribed', resolve));
    await proxy.start(port);
    expect(await recovered).toMatchObject({ wasRecovering: true, recovered: true });
    await expect.poll(() => summaries.some((s) => s.taskId === created)).toBe(true);
    await expect.poll(() => details.at(-1)?.state.lifecycleStatus).toBe('CANCELLED');
  });
});

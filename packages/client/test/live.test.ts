/**
 * The task store bound to a real gateway through the real `centrifuge` SDK: the first subscription loads
 * a snapshot, a recovered reconnect does not, a reconnect whose history expired reloads it; connection
 * states follow the SDK; a followed task's detail flows in.
 */
import { createServer, type Server } from 'node:http';
import { Gateway } from '@tdp/gateway';
import { Centrifuge } from 'centrifuge';
import { SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import {
  type Broadcast,
  bindTaskStore,
  snapshotRetryDelay,
  type TaskDetail,
  TaskStore,
  type TaskSummary,
  TdpError,
} from '../src/index.ts';

const secret = 'live-store-secret-of-enough-length';
const sign = (claims: Record<string, unknown>) =>
  new SignJWT(claims)
    .setProtectedHeader({ alg: 'HS256' })
    .setExpirationTime('10m')
    .sign(new TextEncoder().encode(secret));

let server: Server;
let gateway: Gateway;
let url: string;
const clients: Centrifuge[] = [];

beforeAll(async () => {
  server = createServer();
  // A short history: a client away longer than 400 ms cannot be recovered.
  gateway = new Gateway({ hmacKey: secret, history: () => ({ size: 100, ttlMs: 400 }) });
  gateway.attach(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `ws://127.0.0.1:${(server.address() as { port: number }).port}/connection/websocket`;
});
afterAll(async () => {
  for (const client of clients) client.disconnect();
  await gateway.close();
  await new Promise((resolve) => server.close(resolve));
});

const summary = (taskId: string, version: number, lifecycleStatus = 'RUNNING'): TaskSummary => ({
  kind: 'task.summary',
  taskId,
  workflowId: 'w',
  taskVersion: String(version),
  title: `task ${taskId}`,
  lifecycleStatus,
  businessStatus: null,
  health: 'HEALTHY',
  progressPercent: version * 10,
  error: null,
  createdAt: '2026-01-01T00:00:00.000Z',
  updatedAt: '2026-01-01T00:00:00.000Z',
  startedAt: null,
  finishedAt: null,
  notice: null,
});

async function setup(
  user: string,
  snapshot: () => TaskSummary[] | Promise<TaskSummary[]>,
  broadcastChannels: string[] = [],
) {
  const channel = `task_user:t/${user}`;
  const broadcasts: Broadcast[] = [];
  const client = new Centrifuge(url, {
    websocket: WebSocket,
    token: await sign({ sub: user, channels: [channel, ...broadcastChannels] }),
    minReconnectDelay: 50,
    maxReconnectDelay: 100,
  });
  clients.push(client);
  const store = new TaskStore();
  let loads = 0;
  const detailLoads: string[][] = [];
  /** The client id each detail token was asked for with (TDP counts a connection's details by it). */
  const tokenClients: (string | undefined)[] = [];
  const states: string[] = [store.connection];
  store.subscribe(() => {
    if (states.at(-1) !== store.connection) states.push(store.connection);
  });
  const live = bindTaskStore({
    centrifuge: client,
    store,
    loadTasks: async () => {
      loads += 1;
      return snapshot();
    },
    detailToken: async (taskId, clientId) => {
      tokenClients.push(clientId);
      const detailChannel = `task_detail:t/${taskId}`;
      return { channel: detailChannel, token: await sign({ sub: user, channel: detailChannel }) };
    },
    loadDetails: async (taskIds) => {
      detailLoads.push(taskIds);
      return [];
    },
    onBroadcast: (broadcast) => broadcasts.push(broadcast),
  });
  return { channel, client, store, live, loads: () => loads, detailLoads, states, broadcasts, tokenClients };
}

describe('the task store on the centrifuge SDK', () => {
  it('loads a snapshot once subscribed, then applies live messages on top, never moving backwards', async () => {
    const { channel, client, store } = await setup('a', () => [summary('t1', 2)]);
    client.connect();
    await expect.poll(() => store.connection).toBe('LIVE');
    expect(store.myTasks().map((t) => t.taskVersion)).toEqual(['2']);
    await gateway.publish(channel, summary('t1', 1));
    await gateway.publish(channel, summary('t2', 1));
    await expect.poll(() => store.myTasks().length).toBe(2);
    expect(store.summary('t1')?.taskVersion).toBe('2');
    await gateway.publish(channel, summary('t1', 3, 'SUCCEEDED'));
    await expect.poll(() => store.summary('t1')?.lifecycleStatus).toBe('SUCCEEDED');
  });

  it('a reconnect that recovers needs no snapshot; one whose history expired reloads it; states follow', async () => {
    let current = [summary('x1', 1)];
    const { channel, client, store, loads, states } = await setup('b', () => current);
    client.connect();
    await expect.poll(() => store.connection).toBe('LIVE');
    expect(loads()).toBe(1);

    client.disconnect();
    await expect.poll(() => store.connection).toBe('STALE');
    await gateway.publish(channel, summary('x1', 2));
    client.connect();
    await expect.poll(() => store.summary('x1')?.taskVersion).toBe('2');
    await expect.poll(() => store.connection).toBe('LIVE');
    expect(loads()).toBe(1);

    client.disconnect();
    await gateway.publish(channel, summary('x1', 3));
    current = [summary('x1', 4)];
    // Longer away than the history lasts: the gateway cannot recover, so the store reloads.
    await new Promise((resolve) => setTimeout(resolve, 600));
    client.connect();
    await expect.poll(() => loads()).toBe(2);
    await expect.poll(() => store.summary('x1')?.taskVersion).toBe('4');
    await expect.poll(() => store.connection).toBe('LIVE');
    expect(states).toEqual([
      'RECOVERING',
      'LIVE',
      'STALE',
      'RECOVERING',
      'LIVE',
      'STALE',
      'RECOVERING',
      'LIVE',
    ]);
  });

  it('follows a task: its detail messages reach the store', async () => {
    const { client, store, live, tokenClients } = await setup('c', () => []);
    let connectedAs = '';
    client.on('connected', (ctx) => {
      connectedAs = ctx.client;
    });
    client.connect();
    await expect.poll(() => store.connection).toBe('LIVE');
    const stop = await live.follow('d1');
    await expect.poll(() => client.getSubscription('task_detail:t/d1')?.state).toBe('subscribed');
    // The token was asked for this connection.
    expect(tokenClients).toEqual([connectedAs]);
    expect(connectedAs).not.toBe('');
    const detail: TaskDetail = {
      kind: 'task.detail',
      taskId: 'd1',
      workflowId: 'w',
      taskVersion: '5',
      state: {
        title: 'd1',
        lifecycleStatus: 'RUNNING',
        progressPercent: 50,
        startedAt: null,
        finishedAt: null,
        asOf: 'now',
        steps: [],
      },
      notice: null,
    };
    await gateway.publish('task_detail:t/d1', detail);
    await expect.poll(() => store.detail('d1')?.taskVersion).toBe('5');
    stop();
    expect(client.getSubscription('task_detail:t/d1')).toBeNull();
  });

  it('after a gap it cannot recover, reloads the list and the details of the followed tasks in one batch', async () => {
    const { client, store, live, loads, detailLoads } = await setup('d', () => []);
    client.connect();
    await expect.poll(() => store.connection).toBe('LIVE');
    await live.follow('f1');
    await live.follow('f2');
    await expect.poll(() => client.getSubscription('task_detail:t/f2')?.state).toBe('subscribed');
    detailLoads.length = 0;
    client.disconnect();
    await gateway.publish('task_user:t/d', summary('f1', 1));
    await new Promise((resolve) => setTimeout(resolve, 600));
    client.connect();
    await expect.poll(() => loads()).toBe(2);
    await expect.poll(() => detailLoads.some((ids) => ids.length === 2)).toBe(true);
    expect(detailLoads.find((ids) => ids.length === 2)!.sort()).toEqual(['f1', 'f2']);
  });

  it("the tenant's and the system's notices go to onBroadcast, not into the tasks, and load no snapshot", async () => {
    const { channel, client, store, loads, broadcasts } = await setup('e', () => [summary('e1', 1)], [
      'task_tenant:t',
      'task_system:public',
    ]);
    client.connect();
    await expect.poll(() => store.connection).toBe('LIVE');
    const notice: Broadcast = {
      kind: 'broadcast',
      scope: 'TENANT',
      id: 'b1',
      title: 'Maintenance',
      message: 'Tonight 22:00',
      severity: 'WARNING',
      link: null,
      sentAt: '2026-01-01T00:00:00.000Z',
    };
    await gateway.publish('task_tenant:t', notice);
    await gateway.publish('task_system:public', {
      kind: 'broadcast',
      scope: 'SYSTEM',
      id: 'b2',
      message: 'v2 is out',
      severity: 'INFO',
      sentAt: '2026-01-01T00:00:00.000Z',
    });
    await gateway.publish(channel, summary('e1', 2));
    await expect.poll(() => store.summary('e1')?.taskVersion).toBe('2');
    await expect.poll(() => broadcasts.map((b) => b.id)).toEqual(['b1', 'b2']);
    expect(broadcasts[0]).toEqual(notice);
    expect(store.myTasks().map((t) => t.taskId)).toEqual(['e1']);
    expect(loads()).toBe(1);
  });

  it('a snapshot load that fails is tried again, spread out, and the store is not LIVE until one succeeds', async () => {
    let failures = 2;
    const { client, store, loads, states } = await setup('retry', async () => {
      if (failures > 0) {
        failures -= 1;
        throw new TdpError(429, 'CONNECTION_LIMIT', 'too many connections from this address', true, 0);
      }
      return [summary('r1', 4)];
    });
    client.connect();
    await expect.poll(() => store.connection, { timeout: 10_000 }).toBe('LIVE');
    expect(loads()).toBe(3);
    expect(store.summary('r1')?.taskVersion).toBe('4');
    // Never LIVE on the list it could not load: RECOVERING throughout the two failures.
    expect(states).toEqual(['RECOVERING', 'LIVE']);
  });

  it('a refusal for good (an expired token) is not retried', async () => {
    const { client, loads } = await setup('expired', async () => {
      throw new TdpError(401, 'UNAUTHENTICATED', 'the token has expired', false);
    });
    client.connect();
    await expect.poll(() => loads()).toBe(1);
    await new Promise((resolve) => setTimeout(resolve, 1_200));
    expect(loads()).toBe(1);
  });
});

describe('snapshotRetryDelay', () => {
  it('doubles from 0.5 s to 10 s, waits at least what the server asked, and spreads at random', () => {
    const full = () => 1;
    expect([0, 1, 2, 5, 9].map((attempt) => snapshotRetryDelay(attempt, null, full))).toEqual([
      500, 1_000, 2_000, 10_000, 10_000,
    ]);
    expect(snapshotRetryDelay(0, { retryAfterSeconds: 3 }, full)).toBe(3_000);
    expect(snapshotRetryDelay(1, null, () => 0)).toBe(500);
  });
});

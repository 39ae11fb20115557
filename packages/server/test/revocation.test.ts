/**
 * Revocation takes effect at once (docs/security.md): a revoked view of a task ends the person's live
 * detail subscription (the in-process gateway, and Centrifugo through its server API) and leaves their
 * task stream's watch set; user and realtime tokens die with the API key that minted them, and need
 * `exp`; a gRPC report stream is refused at its next message once its key is revoked; a revoked worker
 * key's command stream ends and its next request is 401.
 */
import { Metadata } from '@grpc/grpc-js';
import { newId } from '@tdp/protocol';
import { reportingClient } from '@tdp/worker/grpc';
import { Centrifuge, type Subscription } from 'centrifuge';
import { SignJWT } from 'jose';
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
import { type Harness, startHarness } from '../../../test/harness.ts';
import { coordinator } from '../../../test/statusFixture.ts';
import { openTaskStream } from '../../../test/taskStream.ts';
import { sseEvents } from '../../worker/src/sse.ts';

const binary = requireCentrifugo();
const clients: Centrifuge[] = [];
const aborts: AbortController[] = [];
const closers: { close(): void }[] = [];
/** Ends the test's clients and streams: open ones would hold the server's close. */
function closeClients() {
  for (const client of clients.splice(0)) client.disconnect();
  for (const abort of aborts.splice(0)) abort.abort();
  for (const closer of closers.splice(0)) closer.close();
}

type App = Awaited<ReturnType<Harness['createApplication']>>;

/** What a realtime test needs of one TDP server and application. */
function realtimeOf(h: Harness, app: App, createTask: (ownerId: string) => Promise<string>) {
  const tokenFor = async (path: string, body: Record<string, unknown>, apiKey = app.apiKey) => {
    const issued = await h.request('POST', path, { token: apiKey, body });
    if (issued.status !== 200) throw new Error(`${path}: ${issued.status} ${JSON.stringify(issued.body)}`);
    return issued.body;
  };
  async function connectAs(userId: string, apiKey = app.apiKey) {
    const issued = await tokenFor('/v1/realtime/connection-token', { userId }, apiKey);
    const client = new Centrifuge(issued.url, { websocket: WebSocket, token: issued.token });
    clients.push(client);
    let clientId = '';
    client.on('connected', (ctx) => {
      clientId = ctx.client;
    });
    const connected = new Promise((resolve) => client.once('connected', resolve));
    client.connect();
    await connected;
    return { client, clientId: () => clientId };
  }
  async function followDetail(
    connection: { client: Centrifuge; clientId: () => string },
    userId: string,
    taskId: string,
  ) {
    const issued = await tokenFor('/v1/realtime/subscription-token', {
      userId,
      taskId,
      clientId: connection.clientId(),
    });
    const subscription: Subscription = connection.client.newSubscription(issued.channel, {
      token: issued.token,
    });
    const details: { state: { lifecycleStatus: string } }[] = [];
    const unsubscribed: number[] = [];
    subscription.on('publication', (ctx) => details.push(ctx.data));
    subscription.on('unsubscribed', (ctx) => unsubscribed.push(ctx.code));
    const subscribed = new Promise((resolve) => subscription.once('subscribed', resolve));
    subscription.subscribe();
    await subscribed;
    return { subscription, details, unsubscribed };
  }
  const grant = (taskId: string, principalId: string, principalType = 'USER') =>
    h.request('POST', `/v1/tasks/${taskId}/acl`, {
      token: app.apiKey,
      body: { principalType, principalId },
    });
  const revoke = (taskId: string, principalId: string, principalType = 'USER') =>
    h.request('DELETE', `/v1/tasks/${taskId}/acl/${principalType}/${principalId}`, { token: app.apiKey });
  const cancel = (taskId: string) => h.request('POST', `/v1/tasks/${taskId}:cancel`, { token: app.apiKey });

  /**
   * The owner and a viewer (by an ACL grant) follow one task's details; the viewer's grant is revoked:
   * the viewer is unsubscribed, and the task's next change reaches the owner only.
   */
  async function revokeDuringDetail() {
    const taskId = await createTask('owner');
    expect((await grant(taskId, 'viewer')).status).toBe(204);
    const owner = await followDetail(await connectAs('owner'), 'owner', taskId);
    const viewer = await followDetail(await connectAs('viewer'), 'viewer', taskId);
    expect((await revoke(taskId, 'viewer')).status).toBe(204);
    await expect.poll(() => viewer.unsubscribed.length, { timeout: 1_000 }).toBeGreaterThan(0);
    expect(viewer.subscription.state).toBe('unsubscribed');
    await cancel(taskId);
    await expect
      .poll(() => owner.details.at(-1)?.state.lifecycleStatus, { timeout: 10_000 })
      .toBe('CANCELLED');
    expect(viewer.details.some((d) => d.state.lifecycleStatus === 'CANCELLED')).toBe(false);
  }

  return { tokenFor, connectAs, followDetail, grant, revoke, cancel, revokeDuringDetail };
}

/** A second key of the application (the first stays usable), and its id. */
async function secondKey(h: Harness, app: App) {
  const rotated = await h.request('POST', `/admin/v1/applications/${app.applicationId}/api-keys`, {
    token: h.adminToken,
    body: { overlapSeconds: 3600 },
  });
  expect(rotated.status).toBe(201);
  const key = rotated.body.apiKey.key as string;
  return { key, keyId: key.split('_')[1]! };
}

describe('revocation with the in-process gateway', () => {
  let h: Harness;
  let app: App;
  let rt: ReturnType<typeof realtimeOf>;
  const tokenSecret = newTokenSecret();

  beforeAll(async () => {
    h = await startHarness({ runLoops: true, realtimeTokenSecret: tokenSecret });
    app = await h.createApplication();
    rt = realtimeOf(h, app, await publishLiveWorkflow(h, app.apiKey, newId));
  });
  afterAll(async () => {
    closeClients();
    await h.close();
  });

  it('an ACL revoke ends the live detail subscription of the user who lost the view', async () => {
    await rt.revokeDuringDetail();
  });

  it('an ACL revoke drops the task from the task stream’s watch set of those who no longer see it', async () => {
    // Through a project: the stream re-checks its person's view (a user's grant ends the gateway
    // subscription behind the stream too, which would hide whether the stream did).
    const task = await (await publishLiveWorkflow(h, app.apiKey, newId))('owner');
    expect((await rt.grant(task, 'p-watch', 'PROJECT')).status).toBe(204);
    const userToken = async (userId: string) =>
      (
        await h.request('POST', '/v1/user-tokens', {
          token: app.apiKey,
          body: { userId, projects: ['p-watch'] },
        })
      ).body.token as string;
    const owner = await openTaskStream(h.url, await userToken('owner'), { aborts });
    const watcher = await openTaskStream(h.url, await userToken('watcher'), { aborts });
    for (const [stream, userId] of [
      [owner, 'owner'],
      [watcher, 'watcher'],
    ] as const) {
      const put = await h.request('PUT', '/v1/me/task-watch-set', {
        token: await userToken(userId),
        body: { sessionId: stream.sessionId, taskIds: [task] },
      });
      expect(put.status).toBe(200);
    }
    expect((await rt.revoke(task, 'p-watch', 'PROJECT')).status).toBe(204);
    // The removal reaches the watcher's stream; from then on, the task's details do not.
    await expect
      .poll(() => watcher.events.some((e) => e.data.kind === 'task.removed' && e.data.taskId === task), {
        timeout: 5_000,
      })
      .toBe(true);
    await rt.cancel(task);
    const cancelledDetail = (events: typeof owner.events) =>
      events.some(
        (e) =>
          e.data.kind === 'task.detail' &&
          e.data.taskId === task &&
          e.data.state.lifecycleStatus === 'CANCELLED',
      );
    await expect.poll(() => cancelledDetail(owner.events), { timeout: 10_000 }).toBe(true);
    expect(cancelledDetail(watcher.events)).toBe(false);
  });

  it('user tokens die with the key that minted them, at once (REST and the task stream)', async () => {
    const { key, keyId } = await secondKey(h, app);
    const minted = await h.request('POST', '/v1/user-tokens', { token: key, body: { userId: 'k-user' } });
    const token = minted.body.token as string;
    expect((await h.request('GET', '/v1/me/tasks', { token })).status).toBe(200);
    const abort = new AbortController();
    aborts.push(abort);
    const response = await fetch(`${h.url}/v1/me/task-stream?access_token=${encodeURIComponent(token)}`, {
      signal: abort.signal,
    });
    expect(response.status).toBe(200);
    let ended = false;
    void (async () => {
      for await (const _ of sseEvents(response.body!));
      ended = true;
    })().catch(() => {
      ended = true;
    });
    const revoked = await h.request(
      'DELETE',
      `/admin/v1/applications/${app.applicationId}/api-keys/${keyId}`,
      {
        token: h.adminToken,
      },
    );
    expect(revoked.status).toBe(204);
    const refused = await h.request('GET', '/v1/me/tasks', { token });
    expect(refused.status).toBe(401);
    expect(refused.body.code).toBe('UNAUTHENTICATED');
    await expect.poll(() => ended, { timeout: 1_000 }).toBe(true);
    // Tokens of the application's other key still work.
    const other = await h.request('POST', '/v1/user-tokens', {
      token: app.apiKey,
      body: { userId: 'k-user' },
    });
    expect((await h.request('GET', '/v1/me/tasks', { token: other.body.token })).status).toBe(200);
  });

  it('realtime tokens die with the key that minted them: the connection closes and cannot come back', async () => {
    const { key, keyId } = await secondKey(h, app);
    const { client } = await rt.connectAs('rk-user', key);
    const issued = await rt.tokenFor('/v1/realtime/connection-token', { userId: 'rk-late' }, key);
    await h.request('DELETE', `/admin/v1/applications/${app.applicationId}/api-keys/${keyId}`, {
      token: h.adminToken,
    });
    // The open connection is closed; reconnecting with its token is refused for good (3500).
    await expect.poll(() => client.state, { timeout: 2_000 }).toBe('disconnected');
    const late = new Centrifuge(issued.url, { websocket: WebSocket, token: issued.token });
    clients.push(late);
    const refused = new Promise<number>((resolve) => late.once('disconnected', (ctx) => resolve(ctx.code)));
    late.connect();
    expect(await refused).toBe(3500);
  });

  it('a realtime token without exp is refused', async () => {
    const sign = (withExpiry: boolean) => {
      const jwt = new SignJWT({ sub: 'no-exp', channels: [] }).setProtectedHeader({ alg: 'HS256' });
      return (withExpiry ? jwt.setExpirationTime('5m') : jwt).sign(new TextEncoder().encode(tokenSecret));
    };
    const url = `ws://${new URL(h.url).host}/connection/websocket`;
    const outcome = async (token: string) => {
      const client = new Centrifuge(url, { websocket: WebSocket, token });
      clients.push(client);
      const result = new Promise<string | number>((resolve) => {
        client.once('connected', () => resolve('connected'));
        client.once('disconnected', (ctx) => resolve(ctx.code));
      });
      client.connect();
      const got = await result;
      client.disconnect();
      return got;
    };
    expect(await outcome(await sign(true))).toBe('connected');
    expect(await outcome(await sign(false))).toBe(3500);
  });
});

describe('revoked keys on report and command streams', () => {
  let h: Harness;
  let c: Awaited<ReturnType<typeof coordinator>>;

  beforeAll(async () => {
    h = await startHarness();
    c = await coordinator(h);
  });
  afterAll(async () => {
    closeClients();
    await h.close();
  });

  async function workerKey() {
    const issued = await h.request('POST', '/admin/v1/worker-credentials', { token: h.adminToken, body: {} });
    expect(issued.status).toBe(201);
    return issued.body as { id: string; key: string };
  }
  const revokeWorkerKey = (id: string) =>
    h.request('DELETE', `/admin/v1/worker-credentials/${id}`, { token: h.adminToken });

  /** A raw `Report` stream: the frames it answered, and how it ended. */
  function reportStream(bearer: string) {
    const client = reportingClient(`127.0.0.1:${h.server.grpcPort}`);
    closers.push(client);
    const metadata = new Metadata();
    metadata.set('authorization', `Bearer ${bearer}`);
    const call = (client as unknown as { Report(m: Metadata): any }).Report(metadata);
    const frames: any[] = [];
    let ended: { code: number; details: string } | null = null;
    call.on('data', (frame: any) => frames.push(frame));
    call.on('error', (error: { code: number; details: string }) => {
      ended = error;
    });
    let next = 1;
    const send = (bind: object) => call.write({ items: [{ requestId: next++, bind }] });
    return { frames, ended: () => ended, send };
  }

  it('a gRPC report stream is refused at its next message once its key is revoked', async () => {
    const { ctx } = await c.runningContext();
    const app = { applicationId: c.app.applicationId } as App;
    const { key, keyId } = await secondKey(h, app as never);
    const worker = await workerKey();
    const streams = [
      {
        stream: reportStream(key),
        bind: { executionToken: ctx.executionToken },
        revoke: () =>
          h.request('DELETE', `/admin/v1/applications/${app.applicationId}/api-keys/${keyId}`, {
            token: h.adminToken,
          }),
      },
      {
        stream: reportStream(worker.key),
        // Not this worker's attempt: answered with a problem, the stream stays open.
        bind: { credential: 'attempt', attempt: { workerId: newId(), attemptId: newId(), leaseVersion: 1 } },
        revoke: () => revokeWorkerKey(worker.id),
      },
    ];
    for (const { stream, bind } of streams) {
      stream.send(bind);
      // The stream's ready frame, then the answer.
      await expect.poll(() => stream.frames.length).toBe(2);
      expect(stream.ended()).toBeNull();
    }
    for (const { stream, bind, revoke } of streams) {
      expect((await revoke()).status).toBe(204);
      stream.send(bind);
      await expect.poll(() => stream.ended()?.code).toBe(16); // UNAUTHENTICATED
      expect(stream.frames.length).toBe(2);
    }
  });

  it("a revoked worker key's command stream ends, and its next request is 401", async () => {
    const { id, key } = await workerKey();
    const registered = await h.request('POST', '/v1/workers/register', {
      token: key,
      body: {
        instanceId: newId(),
        name: 'revoked',
        nodeId: `node-${newId()}`,
        capabilities: [{ name: 'revoked.op', version: '1' }],
      },
    });
    expect(registered.status).toBe(201);
    const workerId = registered.body.workerId as string;
    const abort = new AbortController();
    aborts.push(abort);
    const response = await fetch(`${h.url}/v1/workers/${workerId}/commands`, {
      headers: { authorization: `Bearer ${key}` },
      signal: abort.signal,
    });
    expect(response.status).toBe(200);
    let ended = false;
    void (async () => {
      for await (const _ of sseEvents(response.body!));
      ended = true;
    })().catch(() => {});
    expect((await revokeWorkerKey(id)).status).toBe(204);
    await expect.poll(() => ended, { timeout: 1_000 }).toBe(true);
    const beat = await h.request('POST', `/v1/workers/${workerId}/heartbeat`, { token: key, body: {} });
    expect(beat.status).toBe(401);
    const again = await fetch(`${h.url}/v1/workers/${workerId}/commands`, {
      headers: { authorization: `Bearer ${key}` },
    });
    expect(again.status).toBe(401);
    await again.body?.cancel();
    expect((await revokeWorkerKey('unknownkey')).body.code).toBe('API_KEY_NOT_FOUND');
  });
});

describe.skipIf(!binary)('revocation with a real Centrifugo', () => {
  let centrifugo: CentrifugoProcess;
  let h: Harness;
  let rt: ReturnType<typeof realtimeOf>;

  beforeAll(async () => {
    const tokenSecret = newTokenSecret();
    centrifugo = await startCentrifugo({ binary: binary!, tokenSecret });
    h = await startHarness({ runLoops: true, ...centrifugoMode(centrifugo, tokenSecret) });
    const app = await h.createApplication();
    rt = realtimeOf(h, app, await publishLiveWorkflow(h, app.apiKey, newId));
  }, 60_000);
  afterAll(async () => {
    closeClients();
    await h?.close();
    await centrifugo?.stop();
  });

  it('an ACL revoke ends the user’s detail subscription through Centrifugo’s server API', async () => {
    await rt.revokeDuringDetail();
  });
});

/**
 * Two TDP replicas on one PostgreSQL with a real Centrifugo serving the browsers (docs/realtime.md,
 * "Moving to Centrifugo"): the relay publishes to Centrifugo only, yet the native task stream and its
 * watch set on replica B carry what was committed through replica A (each replica feeds its own streams
 * from the committed realtime rows), a reconnect with Last-Event-ID resumes or is told to reset, and the
 * 20-detail limit holds per connection across both replicas through leases kept with the tokens.
 */
import { newId } from '@tdp/protocol';
import { Centrifuge, type Subscription } from 'centrifuge';
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
import { openTaskStream, type StreamEvent } from '../../../test/taskStream.ts';
import { attemptEvent, startTestWorker } from '../../../test/testWorker.ts';
import { generateKeyringEntry } from '../src/main.ts';

const binary = requireCentrifugo();

describe.skipIf(!binary)('two replicas with Centrifugo: task streams, watch sets, the detail limit', () => {
  const tokenSecret = newTokenSecret();
  const keyringEntry = generateKeyringEntry('replicas');
  let centrifugo: CentrifugoProcess;
  let a: Harness;
  let b: Harness;
  let app: Awaited<ReturnType<Harness['createApplication']>>;
  let createTask: (ownerId: string) => Promise<string>;
  const aborts: AbortController[] = [];
  const clients: Centrifuge[] = [];
  // The worker holds each attempt at these gates, so the test decides when a task moves.
  const gates = new Map<string, { start: () => void; finish: () => void }>();

  beforeAll(async () => {
    centrifugo = await startCentrifugo({ binary: binary!, tokenSecret });
    const replica = (sharedDatabaseUrl?: string) =>
      startHarness({
        runLoops: true,
        ...centrifugoMode(centrifugo, tokenSecret),
        keyringEntry,
        // No poll within a test's patience: another replica's commits arrive through its NOTIFY.
        // Streams renew their shared record (and pick up a watch set whose NOTIFY was lost) this often.
        settings: { realtimeFollowPollMs: 600_000, sseKeepAliveMs: 300 },
        ...(sharedDatabaseUrl ? { sharedDatabaseUrl } : {}),
      });
    a = await replica();
    b = await replica(a.databaseUrl);
    app = await a.createApplication();
    createTask = await publishLiveWorkflow(a, app.apiKey, newId);
    const workerKey = (
      await a.request('POST', '/admin/v1/worker-credentials', { token: a.adminToken, body: {} })
    ).body.key as string;
    await startTestWorker({
      baseUrl: a.url,
      workerKey,
      nodeId: 'node-replicas',
      capabilities: [{ name: 'nobody.live', version: '1' }],
      handler: async (command, report) => {
        let start = () => {};
        let finish = () => {};
        const started = new Promise<void>((resolve) => {
          start = resolve;
        });
        const finished = new Promise<void>((resolve) => {
          finish = resolve;
        });
        gates.set(command.taskId, { start, finish });
        await started;
        await report([
          attemptEvent(command, 'STEP_STARTED', 1),
          attemptEvent(command, 'STEP_PROGRESS', 2, { progress: { percent: 50 } }),
        ]);
        await finished;
        await report([attemptEvent(command, 'STEP_COMPLETED', 3, { output: {}, durationMs: 5 })]);
      },
    });
  }, 60_000);

  afterAll(async () => {
    for (const abort of aborts) abort.abort();
    for (const client of clients) client.disconnect();
    // B shares A's database: it goes first, and A drops the database.
    await b?.close();
    await a?.close();
    await centrifugo?.stop();
  });

  const userToken = async (h: Harness, userId: string) =>
    (await h.request('POST', '/v1/user-tokens', { token: app.apiKey, body: { userId } })).body
      .token as string;

  const openStream = (h: Harness, token: string, lastEventId?: string) =>
    openTaskStream(h.url, token, { aborts, ...(lastEventId ? { lastEventId } : {}) });
  const summaries = (events: StreamEvent[], taskId: string) =>
    events.filter((e) => e.data.kind === 'task.summary' && e.data.taskId === taskId).map((e) => e.data);
  const details = (events: StreamEvent[], taskId: string) =>
    events.filter((e) => e.data.kind === 'task.detail' && e.data.taskId === taskId).map((e) => e.data);

  it("a stream on replica B carries what replica A committed: the summary, a watched task's detail, and a resume with Last-Event-ID", async () => {
    const token = await userToken(b, 'r1');
    const stream = await openStream(b, token);
    const taskId = await createTask('r1');
    await expect.poll(() => summaries(stream.events, taskId).length).toBeGreaterThan(0);

    // The stream is on B; its watch-set PUT reaches A (no sticky sessions), and the task moves through A.
    const watched = await a.request('PUT', '/v1/me/task-watch-set', {
      token,
      body: { sessionId: stream.sessionId, taskIds: [taskId] },
    });
    expect(watched.status).toBe(200);
    await expect.poll(() => gates.has(taskId), { timeout: 10_000 }).toBe(true);
    gates.get(taskId)!.start();
    await expect
      .poll(() => details(stream.events, taskId).some((d) => d.triggerEvent?.eventType === 'STEP_PROGRESS'))
      .toBe(true);
    await expect.poll(() => summaries(stream.events, taskId).at(-1)?.lifecycleStatus).toBe('RUNNING');
    // Someone else's task, committed through A, never shows on r1's stream.
    const foreign = await createTask('someone-else');

    const last = stream.events.filter((e) => e.id).at(-1)!;
    stream.close();
    // While away: the task finishes, through A.
    gates.get(taskId)!.finish();
    await expect
      .poll(
        async () =>
          (await a.request('GET', `/v1/tasks/${taskId}`, { token: app.apiKey })).body.task.lifecycleStatus,
      )
      .toBe('SUCCEEDED');

    const resumed = await openStream(b, token, last.id);
    await expect.poll(() => summaries(resumed.events, taskId).at(-1)?.lifecycleStatus).toBe('SUCCEEDED');
    expect(resumed.events.some((e) => e.data.kind === 'stream.reset')).toBe(false);
    expect(resumed.events.some((e) => e.data.taskId === foreign)).toBe(false);
    resumed.close();

    // Replica A never held that stream: the cursor means nothing there, and the page is told to reload.
    const elsewhere = await openStream(a, await userToken(a, 'r1'), last.id);
    await expect.poll(() => elsewhere.events.some((e) => e.data.kind === 'stream.reset')).toBe(true);
    elsewhere.close();
  });

  it("a watch-set PUT reaching another replica than the stream's is checked there as on the stream's own", async () => {
    const token = await userToken(b, 'r2');
    const stream = await openStream(b, token);
    const mine = await createTask('r2');
    const theirs = await createTask('r3');
    const put = (as: string, taskIds: string[]) =>
      a.request('PUT', '/v1/me/task-watch-set', {
        token: as,
        body: { sessionId: stream.sessionId, taskIds },
      });
    // Someone else's token does not find r2's stream; a task r2 may not see is refused, and nothing changes.
    const foreign = await put(await userToken(a, 'r3'), [theirs]);
    expect(foreign.status).toBe(404);
    expect(foreign.body.code).toBe('WATCH_SESSION_NOT_FOUND');
    const hidden = await put(token, [mine, theirs]);
    expect(hidden.status).toBe(404);
    expect(hidden.body.code).toBe('TASK_NOT_FOUND');
    expect((await put(token, [mine])).status).toBe(200);
    await expect.poll(() => gates.has(mine), { timeout: 10_000 }).toBe(true);
    gates.get(mine)!.start();
    await expect.poll(() => details(stream.events, mine).length).toBeGreaterThan(0);
    expect(details(stream.events, theirs)).toEqual([]);
    // Once the stream is closed, no replica finds it.
    stream.close();
    await expect.poll(async () => (await put(token, [mine])).body.code).toBe('WATCH_SESSION_NOT_FOUND');
  });

  it('a stored watch set whose NOTIFY was lost is applied when the holder next renews its stream', async () => {
    const token = await userToken(b, 'r4');
    const stream = await openStream(b, token);
    const taskId = await createTask('r4');
    await expect.poll(() => summaries(stream.events, taskId).length).toBeGreaterThan(0);
    // What a PUT on A stores, without the NOTIFY that would wake B at once.
    const aliveUntil = async () =>
      (
        await a.server.sql<{ at: Date }[]>`
        SELECT alive_until AS at FROM task_stream_session WHERE session_id = ${stream.sessionId}`
      )[0]!.at.getTime();
    const before = await aliveUntil();
    await a.server.sql`
      UPDATE task_stream_session
      SET task_ids = ${[taskId]}::uuid[], watch_expires_at = ${new Date(a.clock.now().getTime() + 600_000)}
      WHERE session_id = ${stream.sessionId}`;
    // B's next renewal (it renews from its clock, moved on a little) reads the stored set back.
    b.clock.advance(1);
    await expect.poll(aliveUntil, { timeout: 5_000 }).toBeGreaterThan(before);
    await a.request('POST', `/v1/tasks/${taskId}:cancel`, { token: app.apiKey });
    await expect
      .poll(() => details(stream.events, taskId).at(-1)?.state.lifecycleStatus, { timeout: 5_000 })
      .toBe('CANCELLED');
    stream.close();
  });

  /** A page's SDK connected to Centrifugo with a connection token from `h`. */
  async function connect(h: Harness, userId: string) {
    const issued = await h.request('POST', '/v1/realtime/connection-token', {
      token: app.apiKey,
      body: { userId },
    });
    const client = new Centrifuge(issued.body.url, { websocket: WebSocket, token: issued.body.token });
    clients.push(client);
    const connected = new Promise<string>((resolve, reject) => {
      client.once('connected', (ctx) => resolve(ctx.client));
      client.once('disconnected', (ctx) =>
        reject(new Error(`Centrifugo refused: ${ctx.code} ${ctx.reason}`)),
      );
    });
    client.connect();
    return { client, clientId: await connected };
  }
  const detailToken = (h: Harness, userId: string, taskId: string, clientId?: string) =>
    h.request('POST', '/v1/realtime/subscription-token', {
      token: app.apiKey,
      body: { userId, taskId, ...(clientId ? { clientId } : {}) },
    });

  /** Subscribes the SDK to each task's detail, its tokens asked alternately of A and B. */
  async function followAll(client: Centrifuge, userId: string, clientId: string, taskIds: string[]) {
    const subscriptions: Subscription[] = [];
    for (const [index, taskId] of taskIds.entries()) {
      const issued = await detailToken(index % 2 === 0 ? a : b, userId, taskId, clientId);
      expect(issued.status).toBe(200);
      const subscription = client.newSubscription(issued.body.channel, { token: issued.body.token });
      const subscribed = new Promise<void>((resolve, reject) => {
        subscription.once('subscribed', () => resolve());
        subscription.once('unsubscribed', (ctx) => reject(new Error(`${ctx.code} ${ctx.reason}`)));
      });
      subscription.subscribe();
      await subscribed;
      subscriptions.push(subscription);
    }
    return subscriptions;
  }

  it('a connection follows at most 20 task details, counted across replicas; leases end with their tokens and renew with a refresh', async () => {
    const { client, clientId } = await connect(a, 'lim');
    const tasks: string[] = [];
    for (let i = 0; i < 22; i += 1) tasks.push(await createTask('lim'));
    // Twenty details, their tokens asked alternately of A and B, all subscribed in Centrifugo.
    const subscriptions = await followAll(client, 'lim', clientId, tasks.slice(0, 20));
    expect(subscriptions.every((s) => s.state === 'subscribed')).toBe(true);

    for (const h of [a, b]) {
      const refused = await detailToken(h, 'lim', tasks[20]!, clientId);
      expect(refused.status).toBe(409);
      expect(refused.headers.get('content-type')).toContain('application/problem+json');
      expect(refused.body.code).toBe('DETAIL_SUBSCRIPTION_LIMIT');
    }
    // A token for a task it already follows is a renewal, not a 21st.
    expect((await detailToken(b, 'lim', tasks[0]!, clientId)).status).toBe(200);
    // Another connection has its own twenty.
    const other = await connect(b, 'lim');
    expect((await detailToken(b, 'lim', tasks[20]!, other.clientId)).status).toBe(200);
    // Without the connection's id, TDP could not count: refused, and nothing is leased.
    const unnamed = await detailToken(a, 'lim', tasks[21]!);
    expect(unnamed.status).toBe(400);
    expect(unnamed.body.code).toBe('VALIDATION_FAILED');

    // Ten minutes on, the SDK refreshes the tokens of 19 of them (the twentieth was left to expire).
    for (const h of [a, b]) h.clock.advance(600_000);
    for (const [index, taskId] of tasks.slice(0, 19).entries())
      expect((await detailToken(index % 2 === 0 ? b : a, 'lim', taskId, clientId)).status).toBe(200);
    // Past the first tokens' 15 minutes: the unrefreshed lease is gone, the refreshed ones hold.
    for (const h of [a, b]) h.clock.advance(400_000);
    expect((await detailToken(a, 'lim', tasks[20]!, clientId)).status).toBe(200);
    const full = await detailToken(b, 'lim', tasks[21]!, clientId);
    expect(full.status).toBe(409);
    expect(full.body.code).toBe('DETAIL_SUBSCRIPTION_LIMIT');
  });

  it('two replicas minting at once never give one connection a 21st detail', async () => {
    const tasks: string[] = [];
    for (let i = 0; i < 25; i += 1) tasks.push(await createTask('race'));
    const clientId = newId();
    const answers = await Promise.all(
      tasks.map((taskId, index) => detailToken(index % 2 === 0 ? a : b, 'race', taskId, clientId)),
    );
    expect(answers.filter((answer) => answer.status === 200)).toHaveLength(20);
    const refused = answers.filter((answer) => answer.status !== 200);
    expect(refused.map((answer) => answer.body.code)).toEqual(Array(5).fill('DETAIL_SUBSCRIPTION_LIMIT'));
  });

  it("a detail the page left frees its place: at the limit, TDP asks Centrifugo's presence", async () => {
    const { client, clientId } = await connect(b, 'left');
    const tasks: string[] = [];
    for (let i = 0; i < 21; i += 1) tasks.push(await createTask('left'));
    const subscriptions = await followAll(client, 'left', clientId, tasks.slice(0, 20));
    const left = subscriptions[3]!;
    left.unsubscribe();
    client.removeSubscription(left);
    // Leases taken moments ago stay: their tokens might still be on their way to the page.
    const fresh = await detailToken(a, 'left', tasks[20]!, clientId);
    expect(fresh.status).toBe(409);
    expect(fresh.body.code).toBe('DETAIL_SUBSCRIPTION_LIMIT');

    for (const h of [a, b]) h.clock.advance(60_000);
    // Centrifugo no longer has the connection in the channel it left: that lease goes, the new one fits.
    await expect.poll(async () => (await detailToken(a, 'left', tasks[20]!, clientId)).status).toBe(200);
    // The nineteen it still follows are present: a 21st is refused.
    const again = await detailToken(b, 'left', tasks[3]!, clientId);
    expect(again.status).toBe(409);
    expect(again.body.code).toBe('DETAIL_SUBSCRIPTION_LIMIT');
  });
});

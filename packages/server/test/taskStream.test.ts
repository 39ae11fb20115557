/**
 * Live status for a plain EventSource: GET /v1/me/task-stream with a user token, resumed with
 * Last-Event-ID, and PUT /v1/me/task-watch-set for the details of a few tasks.
 */
import { newId } from '@tdp/protocol';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Harness, startHarness } from '../../../test/harness.ts';
import { openTaskStream } from '../../../test/taskStream.ts';

let h: Harness;
let app: Awaited<ReturnType<Harness['createApplication']>>;
const aborts: AbortController[] = [];

beforeAll(async () => {
  h = await startHarness({ runLoops: true });
  app = await h.createApplication();
  await h.request('POST', '/v1/workflow-definitions', {
    token: app.apiKey,
    body: {
      name: 'streamed',
      version: '1',
      steps: [{ key: 'only', capability: 'nobody.stream', capabilityVersion: '1' }],
    },
  });
});
afterAll(async () => {
  for (const abort of aborts) abort.abort();
  await h.close();
});

const userToken = async (userId: string) =>
  (await h.request('POST', '/v1/user-tokens', { token: app.apiKey, body: { userId } })).body.token as string;
const createTask = async (ownerId: string) =>
  (
    await h.request('POST', '/v1/tasks', {
      token: app.apiKey,
      headers: { 'idempotency-key': newId() },
      body: { workflowName: 'streamed', workflowVersion: '1', name: 'streamed task', ownerId },
    })
  ).body.task.id as string;

const open = (token: string, lastEventId?: string) =>
  openTaskStream(h.url, token, { aborts, ...(lastEventId ? { lastEventId } : {}) });

describe('the task stream', () => {
  it('streams the person’s task summaries, and resumes after Last-Event-ID with what was missed', async () => {
    const token = await userToken('s1');
    const first = await open(token);
    const a = await createTask('s1');
    await expect.poll(() => first.events.some((e) => e.data.taskId === a)).toBe(true);
    const last = first.events.filter((e) => e.id).at(-1)!;
    first.close();
    // While away: a new task and a change of the first.
    const b = await createTask('s1');
    await h.request('POST', `/v1/tasks/${a}:cancel`, { token: app.apiKey });
    const second = await open(token, last.id);
    await expect
      .poll(() =>
        second.events
          .filter((e) => e.data.kind === 'task.summary')
          .map((e) => `${e.data.taskId}:${e.data.lifecycleStatus}`),
      )
      .toEqual(expect.arrayContaining([`${b}:PENDING`, `${a}:CANCELLED`]));
    expect(second.events.some((e) => e.data.kind === 'stream.reset')).toBe(false);
    // Someone else's task never shows.
    const foreign = await createTask('someone-else');
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(second.events.some((e) => e.data.taskId === foreign)).toBe(false);
    second.close();
  });

  it('a cursor it cannot use gets a reset (the page reloads its list)', async () => {
    const stream = await open(await userToken('s2'), 'not-a-cursor');
    await expect.poll(() => stream.events.some((e) => e.data.kind === 'stream.reset')).toBe(true);
    stream.close();
  });

  it('the watch-set adds the details of visible tasks, refuses others and changes nothing then', async () => {
    const token = await userToken('s3');
    const stream = await open(token);
    const mine = await createTask('s3');
    const theirs = await createTask('s4');
    const put = (body: unknown, as = token) => h.request('PUT', '/v1/me/task-watch-set', { token: as, body });
    const watched = await put({ sessionId: stream.sessionId, taskIds: [mine] });
    expect(watched.status).toBe(200);
    expect(watched.body.taskIds).toEqual([mine]);
    await h.request('POST', `/v1/tasks/${mine}:cancel`, { token: app.apiKey });
    await expect
      .poll(
        () =>
          stream.events.find((e) => e.data.kind === 'task.detail' && e.data.taskId === mine)?.data.state
            .lifecycleStatus,
      )
      .toBe('CANCELLED');

    const refused = await put({ sessionId: stream.sessionId, taskIds: [mine, theirs] });
    expect(refused.status).toBe(404);
    expect(refused.body.code).toBe('TASK_NOT_FOUND');
    const tooMany = await put({
      sessionId: stream.sessionId,
      taskIds: Array.from({ length: 21 }, () => newId()),
    });
    expect(tooMany.status).toBe(400);
    const unknown = await put({ sessionId: newId(), taskIds: [] });
    expect(unknown.body.code).toBe('WATCH_SESSION_NOT_FOUND');
    // Bound to its user: another person cannot change it.
    const stranger = await put({ sessionId: stream.sessionId, taskIds: [] }, await userToken('s4'));
    expect(stranger.body.code).toBe('WATCH_SESSION_NOT_FOUND');
    // The refused requests changed nothing: the stream still carries the task's details.
    const before = stream.events.length;
    const again = await put({ sessionId: stream.sessionId, taskIds: [mine] });
    expect(again.body.taskIds).toEqual([mine]);
    expect(stream.events.length).toBe(before);
    stream.close();
  });

  it('needs a user token', async () => {
    const response = await fetch(`${h.url}/v1/me/task-stream`);
    expect(response.status).toBe(401);
    expect(((await response.json()) as { code: string }).code).toBe('UNAUTHENTICATED');
  });
});

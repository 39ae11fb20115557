/**
 * The ZIP demo's rules carried over to a second workflow (docs/design/failure-windows.md), end to end on
 * a real server, real PostgreSQL and real workers: download a video, extract its frames, detect on every
 * frame in parallel (a map under `maxParallel`), wait for a reviewer to approve, and let the application
 * publish — its own business action, after TDP's signed SUCCEEDED callback. A rejection ends the task
 * without publishing.
 */
import { createServer, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Harness, startHarness } from '../../../test/harness.ts';
import { completeWith, type StartCommand, startTestWorker } from '../../../test/testWorker.ts';
import { type CallbackEvent, nodeCallbackHandler } from '../../sdk/src/index.ts';

/** Video review as one definition: download, extract, a map of detections, then a reviewer's approval. */
const videoReview = {
  name: 'video-review',
  version: '1',
  inputSchema: {
    type: 'object',
    required: ['videoUrl'],
    properties: { videoUrl: { type: 'string' }, frames: { type: 'integer', minimum: 1, maximum: 1000 } },
  },
  steps: [
    {
      key: 'download',
      capability: 'video.download',
      capabilityVersion: '1',
      inputMapping: { url: '$.input.videoUrl', frames: { from: '$.input.frames', optional: true } },
    },
    {
      key: 'extract',
      capability: 'video.extractFrames',
      capabilityVersion: '1',
      dependsOn: ['download'],
      inputMapping: { video: '$.steps.download.output.video', count: '$.steps.download.output.frames' },
    },
    {
      key: 'detect',
      kind: 'map',
      dependsOn: ['extract'],
      map: {
        items: '$.steps.extract.output.frames',
        capability: 'video.detect',
        capabilityVersion: '1',
        inputMapping: { frame: '$.item', video: '$.steps.download.output.video' },
        maxParallel: 3,
        onItemFailure: 'FAIL_ALL',
      },
    },
    {
      key: 'review',
      kind: 'approval',
      dependsOn: ['detect'],
      approval: {
        approvers: { roles: ['reviewer'] },
        required: 1,
        allowSubmitter: false,
        timeoutMs: 86_400_000,
        onTimeout: 'REJECT',
      },
    },
  ],
};

let h: Harness;
let app: Awaited<ReturnType<Harness['createApplication']>>;
let worker: Awaited<ReturnType<typeof startTestWorker>>;
let receiver: Server;
let callbackUrl: string;
const commands: StartCommand[] = [];
/** Detections running at this moment, and the most seen at once. */
let detecting = 0;
let mostAtOnce = 0;
/** What the application published, by task: its own business action after the SUCCEEDED callback. */
const published = new Map<string, { labels: unknown[]; approvedBy: unknown }>();
const callbacks: CallbackEvent[] = [];

const later = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function handler(command: StartCommand, report: (events: Record<string, unknown>[]) => Promise<any>) {
  commands.push(command);
  const input = command.input as Record<string, any>;
  switch (command.capability) {
    case 'video.download':
      return completeWith({ video: `blob://${input.url}`, frames: input.frames ?? 7 })(command, report);
    case 'video.extractFrames':
      return completeWith({
        frames: Array.from({ length: input.count as number }, (_, i) => ({ index: i, at: `${i * 40}ms` })),
      })(command, report);
    case 'video.detect': {
      detecting += 1;
      mostAtOnce = Math.max(mostAtOnce, detecting);
      // Long enough that a fourth would overlap if the map let it start.
      await later(150);
      detecting -= 1;
      return completeWith({ frame: input.frame.index, labels: [`label-${input.frame.index}`] })(
        command,
        report,
      );
    }
    default:
      throw new Error(`unexpected capability ${command.capability}`);
  }
}

beforeAll(async () => {
  h = await startHarness({ runLoops: true, allowInsecureCallbacks: true });
  app = await h.createApplication();
  receiver = createServer(
    nodeCallbackHandler({
      secrets: [app.callbackSecret],
      onCallback: (event) => {
        callbacks.push(event);
        // The application's own business action, once TDP says the run succeeded (approval included).
        if (event.type === 'execution.succeeded' && event.data.outputs && !published.has(event.taskId)) {
          const outputs = event.data.outputs as Record<string, any>;
          published.set(event.taskId, {
            labels: (outputs.detect as { labels: string[] }[]).map((item) => item.labels[0]),
            approvedBy: outputs.review.decisions[0].decidedBy,
          });
        }
      },
    }),
  );
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  const address = receiver.address();
  callbackUrl = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}/tdp`;
  const workerKey = (
    await h.request('POST', '/admin/v1/worker-credentials', { token: h.adminToken, body: {} })
  ).body.key;
  worker = await startTestWorker({
    baseUrl: h.url,
    workerKey,
    nodeId: 'node-video',
    maxConcurrency: 8,
    capabilities: ['video.download', 'video.extractFrames', 'video.detect'].map((name) => ({
      name,
      version: '1',
    })),
    handler,
  });
  const definition = await h.request('POST', '/v1/workflow-definitions', {
    token: app.apiKey,
    body: videoReview,
  });
  expect(definition.status, JSON.stringify(definition.body)).toBe(201);
});
afterAll(async () => {
  await worker?.stop();
  await h?.close();
  await new Promise((resolve) => receiver?.close(resolve));
});

const read = async (taskId: string) =>
  (await h.request('GET', `/v1/tasks/${taskId}`, { token: app.apiKey })).body;
const stepOf = async (taskId: string, key: string) =>
  (await read(taskId)).execution.steps.find((s: { key: string }) => s.key === key);

async function submit(name: string, frames: number) {
  const created = await h.request('POST', '/v1/tasks', {
    token: app.apiKey,
    headers: { 'idempotency-key': name },
    body: {
      workflowName: 'video-review',
      workflowVersion: '1',
      name,
      ownerId: 'uploader',
      input: { videoUrl: `https://videos.example/${name}.mp4`, frames },
      callbackUrl,
    },
  });
  expect(created.status).toBe(201);
  const taskId = created.body.task.id as string;
  // The reviewers see the task through its ACL (role reviewer).
  const granted = await h.request('POST', `/v1/tasks/${taskId}/acl`, {
    token: app.apiKey,
    body: { principalType: 'ROLE', principalId: 'reviewer', permission: 'OPERATE' },
  });
  expect(granted.status).toBeLessThan(300);
  return taskId;
}

async function userToken(userId: string, roles: string[] = []) {
  const issued = await h.request('POST', '/v1/user-tokens', { token: app.apiKey, body: { userId, roles } });
  expect(issued.status).toBeLessThan(300);
  return issued.body.token as string;
}

const decide = (taskId: string, decision: 'approve' | 'reject', token: string, comment: string) =>
  h.request('POST', `/v1/tasks/${taskId}/steps/review:${decision}`, {
    token,
    headers: { 'idempotency-key': `${taskId}-${decision}-${comment}` },
    body: { comment },
  });

describe('the video review', () => {
  it('detects on every frame under maxParallel, waits for the reviewer, and the application publishes', async () => {
    const taskId = await submit('holiday', 7);
    await expect
      .poll(async () => (await stepOf(taskId, 'review'))?.waitingFor?.kind ?? null, { timeout: 30_000 })
      .toBe('approval');
    const task = await read(taskId);
    expect(task.task.lifecycleStatus).toBe('RUNNING');
    expect(task.task.businessStatus).toBe('WAITING_USER_ACTION');
    expect((await stepOf(taskId, 'review')).waitingFor.approvers).toEqual({ roles: ['reviewer'] });

    // Every frame was detected once, at most 3 at a time, and really in parallel.
    const detections = commands.filter((c) => c.taskId === taskId && c.capability === 'video.detect');
    expect(detections.map((c) => (c.input as any).frame.index).sort()).toEqual([0, 1, 2, 3, 4, 5, 6]);
    expect(mostAtOnce).toBeLessThanOrEqual(3);
    expect(mostAtOnce).toBeGreaterThan(1);
    const detect = await stepOf(taskId, 'detect');
    expect(detect.status).toBe('SUCCEEDED');
    expect(detect.data.map((item: any) => item.frame)).toEqual([0, 1, 2, 3, 4, 5, 6]);
    expect(published.has(taskId)).toBe(false);

    // The uploader is no reviewer; the reviewer approves.
    const uploader = await decide(taskId, 'approve', await userToken('uploader'), 'mine');
    expect(uploader.status).toBe(403);
    const approved = await decide(taskId, 'approve', await userToken('rita', ['reviewer']), 'looks right');
    expect(approved.status, JSON.stringify(approved.body)).toBe(201);

    await expect.poll(() => published.get(taskId), { timeout: 15_000 }).toBeDefined();
    expect(published.get(taskId)).toEqual({
      labels: [0, 1, 2, 3, 4, 5, 6].map((i) => `label-${i}`),
      approvedBy: 'user:rita',
    });
    const done = await read(taskId);
    expect(done.task.lifecycleStatus).toBe('SUCCEEDED');
    expect(done.task.businessStatus).not.toBe('WAITING_USER_ACTION');
    // The callbacks came in order, the last one the success the application published on.
    const mine = callbacks.filter((c) => c.taskId === taskId);
    expect(mine.map((c) => c.sequence)).toEqual([...mine.map((c) => c.sequence)].sort((a, b) => a - b));
    expect(mine.at(-1)!.type).toBe('execution.succeeded');
  });

  it('a rejection fails the task with APPROVAL_REJECTED, and nothing is published', async () => {
    const taskId = await submit('rejected', 3);
    await expect
      .poll(async () => (await stepOf(taskId, 'review'))?.waitingFor?.kind ?? null, { timeout: 30_000 })
      .toBe('approval');
    const rejected = await decide(taskId, 'reject', await userToken('rita', ['reviewer']), 'blurry');
    expect(rejected.status, JSON.stringify(rejected.body)).toBe(201);
    await expect
      .poll(async () => (await read(taskId)).task.lifecycleStatus, { timeout: 15_000 })
      .toBe('FAILED');
    expect((await read(taskId)).task.failure.code).toBe('APPROVAL_REJECTED');
    await expect
      .poll(() => callbacks.some((c) => c.taskId === taskId && c.type === 'execution.failed'), {
        timeout: 15_000,
      })
      .toBe(true);
    expect(published.has(taskId)).toBe(false);
  });
});

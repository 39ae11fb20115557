/**
 * Rerun from a step (`POST /v1/tasks/{id}:retry` with `fromStep`) on a real server, real PostgreSQL and a
 * real worker: the steps before the named one keep their outputs and do not run again, the rerun step's
 * input mapping reads those outputs, the timeline and the callbacks show the reuse, and bad requests
 * are refused with their own codes without starting an execution.
 */
import { createServer, type Server } from 'node:http';
import { newId } from '@tdp/protocol';
import type { Centrifuge } from 'centrifuge';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { followTaskDetail } from '../../../test/followDetail.ts';
import { type Harness, startHarness } from '../../../test/harness.ts';
import { completeWith, failWith, type StartCommand, startTestWorker } from '../../../test/testWorker.ts';
import { planRerun } from '../src/core/orchestration/rerun.ts';

let h: Harness;
let app: Awaited<ReturnType<Harness['createApplication']>>;
let workerKey: string;
let receiver: Server;
let receiverUrl: string;
const callbacks: any[] = [];

/** fetch → shape → publish, a chain: each step reads the previous one's output. */
const chain = {
  name: 'rerun-chain',
  version: '1',
  steps: [
    { key: 'fetch', capability: 'rerun.fetch', capabilityVersion: '1', inputMapping: { url: '$.input.url' } },
    {
      key: 'shape',
      capability: 'rerun.shape',
      capabilityVersion: '1',
      dependsOn: ['fetch'],
      inputMapping: { body: '$.steps.fetch.output.body' },
    },
    {
      key: 'publish',
      capability: 'rerun.publish',
      capabilityVersion: '1',
      dependsOn: ['shape'],
      inputMapping: { shaped: '$.steps.shape.output.shaped', body: '$.steps.fetch.output.body' },
    },
  ].map((s) => ({ ...s, retry: { maxAttempts: 1 } })),
};

/** What the worker does per capability; the test switches `publishFails` and `shapeFails`. */
let publishFails = true;
let shapeFails = false;
let runs = 0;
/** While set, every attempt waits for it before reporting (the task stays RUNNING). */
let gate: Promise<void> | null = null;
let worker: Awaited<ReturnType<typeof startTestWorker>>;

const handler = async (
  command: StartCommand,
  report: (events: Record<string, unknown>[]) => Promise<any>,
) => {
  runs += 1;
  await gate;
  const fail = failWith({ category: 'INPUT', code: 'BROKEN', retryable: false });
  if (command.capability === 'rerun.fetch')
    return completeWith({ body: `body-of-${command.input.url}` })(command, report);
  if (command.capability === 'rerun.shape')
    return shapeFails ? fail(command, report) : completeWith({ shaped: `shaped-${runs}` })(command, report);
  return publishFails ? fail(command, report) : completeWith({ published: command.input })(command, report);
};

beforeAll(async () => {
  h = await startHarness({ runLoops: true, allowInsecureCallbacks: true });
  app = await h.createApplication();
  workerKey = (await h.request('POST', '/admin/v1/worker-credentials', { token: h.adminToken, body: {} }))
    .body.key;
  expect(
    (await h.request('POST', '/v1/workflow-definitions', { token: app.apiKey, body: chain })).status,
  ).toBe(201);
  receiver = createServer((req, res) => {
    let raw = '';
    req.on('data', (chunk) => {
      raw += chunk;
    });
    req.on('end', () => {
      callbacks.push(JSON.parse(raw));
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  const address = receiver.address();
  receiverUrl = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}/callback`;
  worker = await startTestWorker({
    baseUrl: h.url,
    workerKey,
    nodeId: 'node-rerun',
    capabilities: ['rerun.fetch', 'rerun.shape', 'rerun.publish'].map((name) => ({ name, version: '1' })),
    handler,
  });
});
afterAll(async () => {
  for (const client of clients) client.disconnect();
  await worker?.stop();
  await h.close();
  await new Promise((resolve) => receiver.close(resolve));
});

const status = async (taskId: string) =>
  (await h.request('GET', `/v1/tasks/${taskId}`, { token: app.apiKey })).body;
const endOf = async (taskId: string, lifecycle: string) =>
  expect.poll(async () => (await status(taskId)).task.lifecycleStatus, { timeout: 15_000 }).toBe(lifecycle);
const rerun = (taskId: string, body: Record<string, unknown>) =>
  h.request('POST', `/v1/tasks/${taskId}:retry`, { token: app.apiKey, body });
const clients: Centrifuge[] = [];
/** The task's detail channel through the real gateway, as the owner's browser would follow it. */
const followDetail = (taskId: string) => followTaskDetail(h, app.apiKey, 'rerun-owner', taskId, clients);
const commandsFor = (taskId: string) => worker.received.filter((c) => c.taskId === taskId);

/** A task whose `publish` step failed after `fetch` and `shape` succeeded. */
async function failedAtPublish() {
  publishFails = true;
  shapeFails = false;
  const key = newId();
  const created = await h.request('POST', '/v1/tasks', {
    token: app.apiKey,
    headers: { 'idempotency-key': key },
    body: {
      workflowName: 'rerun-chain',
      workflowVersion: '1',
      name: key,
      input: { url: key },
      callbackUrl: receiverUrl,
      ownerId: 'rerun-owner',
    },
  });
  expect(created.status).toBe(201);
  const taskId = created.body.task.id as string;
  await endOf(taskId, 'FAILED');
  return { taskId, first: await status(taskId) };
}

describe('rerun from a step', () => {
  it('from the failed last step: the first two do not run again, their outputs feed the rerun step', async () => {
    const { taskId, first } = await failedAtPublish();
    const shapedBefore = first.execution.steps.find((s: any) => s.key === 'shape').data;
    publishFails = false;
    const before = commandsFor(taskId).length;
    const details = await followDetail(taskId);

    const answer = await rerun(taskId, { fromStep: 'publish' });
    expect(answer.status).toBe(201);
    expect(answer.body.execution.number).toBe(2);
    // Visible at once in the answer: the reused steps SUCCEEDED with the earlier output.
    expect(answer.body.execution.steps.map((s: any) => [s.key, s.status, s.reusedFromExecutionId])).toEqual([
      ['fetch', 'SUCCEEDED', first.execution.id],
      ['shape', 'SUCCEEDED', first.execution.id],
      ['publish', expect.stringMatching(/READY|QUEUED/), null],
    ]);
    await endOf(taskId, 'SUCCEEDED');

    // The worker saw only the publish step of execution #2, with the reused outputs mapped in.
    const again = commandsFor(taskId).slice(before);
    expect(again.map((c) => c.stepId)).toEqual(['publish']);
    expect(again[0]!.input).toEqual({ shaped: shapedBefore.shaped, body: `body-of-${first.task.input.url}` });

    const final = await status(taskId);
    expect(final.execution.steps.find((s: any) => s.key === 'shape')).toMatchObject({
      status: 'SUCCEEDED',
      data: shapedBefore,
      reusedFromExecutionId: first.execution.id,
    });

    const timeline = (await h.request('GET', `/v1/tasks/${taskId}/timeline`, { token: app.apiKey })).body
      .items;
    const reused = timeline.filter((m: any) => m.kind === 'STEP_REUSED');
    expect(reused.map((m: any) => m.data)).toEqual([
      { stepId: 'fetch', reusedFromExecutionId: first.execution.id },
      { stepId: 'shape', reusedFromExecutionId: first.execution.id },
    ]);
    expect(timeline.find((m: any) => m.kind === 'CREATED' && m.data.fromStep === 'publish')).toBeDefined();
    const events = (await h.request('GET', `/v1/tasks/${taskId}/events`, { token: app.apiKey })).body.items;
    expect(events.find((e: any) => e.eventType === 'TASK_RETRIED').payload).toMatchObject({
      fromStep: 'publish',
      reusedSteps: ['fetch', 'shape'],
    });

    // The live detail channel got the rerun's commit: the reused steps SUCCEEDED with their data.
    const retried = await expect
      .poll(() => details.find((d) => d.triggerEvent.eventType === 'TASK_RETRIED'), { timeout: 10_000 })
      .toBeDefined()
      .then(() => details.find((d) => d.triggerEvent.eventType === 'TASK_RETRIED'));
    expect(retried.state.steps.map((s: any) => [s.stepId, s.status, s.reusedFromExecutionId])).toEqual([
      ['fetch', 'SUCCEEDED', first.execution.id],
      ['shape', 'SUCCEEDED', first.execution.id],
      ['publish', expect.stringMatching(/READY|QUEUED/), null],
    ]);
    expect(retried.state.steps[1].data).toEqual(shapedBefore);

    // The new execution's success callback carries the reused outputs beside the new one.
    await expect
      .poll(
        () =>
          callbacks.find(
            (c) =>
              c.taskId === taskId && c.executionId === final.execution.id && c.type === 'execution.succeeded',
          ),
        { timeout: 15_000 },
      )
      .toBeDefined();
    const succeeded = callbacks.find(
      (c) => c.executionId === final.execution.id && c.type === 'execution.succeeded',
    );
    expect(Object.keys(succeeded.data.outputs).sort()).toEqual(['fetch', 'publish', 'shape']);
    expect(succeeded.data.outputs.shape).toEqual(shapedBefore);
  });

  it('from the middle step: it and its downstream run again, the first step does not', async () => {
    const { taskId, first } = await failedAtPublish();
    publishFails = false;
    const before = commandsFor(taskId).length;
    const answer = await rerun(taskId, { fromStep: 'shape' });
    expect(answer.status).toBe(201);
    await endOf(taskId, 'SUCCEEDED');
    expect(
      commandsFor(taskId)
        .slice(before)
        .map((c) => c.stepId),
    ).toEqual(['shape', 'publish']);
    const final = await status(taskId);
    expect(final.execution.steps.map((s: any) => [s.key, s.reusedFromExecutionId])).toEqual([
      ['fetch', first.execution.id],
      ['shape', null],
      ['publish', null],
    ]);
    // The new shape output, not the earlier one, reached publish.
    const shaped = final.execution.steps.find((s: any) => s.key === 'shape').data.shaped;
    expect(shaped).not.toEqual(first.execution.steps.find((s: any) => s.key === 'shape').data.shaped);
    expect(final.execution.steps.find((s: any) => s.key === 'publish').data.published.shaped).toBe(shaped);

    // A second rerun names the execution that produced the output, through the first rerun.
    publishFails = true;
    await rerun(taskId, { fromStep: 'publish' }).then((r) => expect(r.status).toBe(201));
    await endOf(taskId, 'FAILED');
    const third = await status(taskId);
    expect(third.execution.steps.map((s: any) => s.reusedFromExecutionId)).toEqual([
      first.execution.id,
      final.execution.id,
      null,
    ]);
  });

  it('refuses an unknown step, a task not ended, and a step to reuse with no output; nothing starts', async () => {
    const { taskId, first } = await failedAtPublish();
    const unknown = await rerun(taskId, { fromStep: 'nope' });
    expect(unknown.status).toBe(422);
    expect(unknown.headers.get('content-type')).toMatch(/application\/problem\+json/);
    expect(unknown.body).toMatchObject({
      code: 'RERUN_STEP_UNKNOWN',
      detail: expect.stringContaining('"nope"'),
    });
    const invalid = await rerun(taskId, { fromStep: 'shape', extra: 1 });
    expect(invalid.status).toBe(400);
    expect((await status(taskId)).execution.id).toBe(first.execution.id);

    // A task whose middle step failed: publish never ran, shape has no output to reuse.
    shapeFails = true;
    const key = newId();
    const created = await h.request('POST', '/v1/tasks', {
      token: app.apiKey,
      headers: { 'idempotency-key': key },
      body: { workflowName: 'rerun-chain', workflowVersion: '1', name: key, input: { url: key } },
    });
    const brokenId = created.body.task.id as string;
    await endOf(brokenId, 'FAILED');
    const missing = await rerun(brokenId, { fromStep: 'publish' });
    expect(missing.status).toBe(409);
    expect(missing.body).toMatchObject({
      code: 'RERUN_OUTPUT_MISSING',
      detail: expect.stringContaining('shape'),
    });
    expect((await status(brokenId)).execution.number).toBe(1);
    shapeFails = false;

    // The request repeated while the rerun runs is refused as :retry is: no second execution.
    publishFails = false;
    let open = () => {};
    gate = new Promise((resolve) => {
      open = resolve;
    });
    try {
      expect((await rerun(brokenId, { fromStep: 'shape' })).status).toBe(201);
      const repeated = await rerun(brokenId, { fromStep: 'shape' });
      expect(repeated.status).toBe(409);
      expect(repeated.body.code).toBe('INVALID_TRANSITION');
    } finally {
      open();
      gate = null;
    }
    await endOf(brokenId, 'SUCCEEDED');
    expect((await status(brokenId)).execution.number).toBe(2);
  });
});

describe('the OpenAPI document', () => {
  it('describes fromStep on the retry route and the rerun refusals', async () => {
    const doc = (await (await fetch(`${h.url}/openapi.json`)).json()) as { paths: Record<string, any> };
    const [path, item] = Object.entries<any>(doc.paths).find(([p]) => p.endsWith(':retry'))!;
    expect(path).toMatch(/^\/v1\/tasks\/\{id\}/);
    const body = item.post.requestBody.content['application/json'].schema;
    expect(body.properties.fromStep).toMatchObject({ type: 'string', minLength: 1 });
    expect(item.post.description).toContain('RERUN_STEP_UNKNOWN');
    expect(item.post.description).toContain('RERUN_OUTPUT_MISSING');
  });
});

describe('planRerun', () => {
  const steps = [
    { key: 'a', dependsOn: [] },
    { key: 'b', dependsOn: ['a'] },
    { key: 'c', dependsOn: ['a'] },
    { key: 'd', dependsOn: ['b', 'c'] },
  ] as any;
  const done = (key: string) => ({
    key,
    status: 'SUCCEEDED',
    output: { key },
    dataSchema: 'tdp.output.v1',
    producedIn: 'e1',
  });

  it('reruns the step and its transitive downstream; a sibling branch is reused', () => {
    const plan = planRerun(steps, ['a', 'b', 'c', 'd'].map(done), 'b') as any;
    expect([...plan.rerun].sort()).toEqual(['b', 'd']);
    expect([...plan.reused.keys()].sort()).toEqual(['a', 'c']);
  });

  it('refuses when a step to reuse was cancelled', () => {
    const earlier = [
      done('a'),
      done('b'),
      { key: 'c', status: 'CANCELLED', output: null, dataSchema: null, producedIn: 'e1' },
    ];
    expect(planRerun(steps, earlier, 'd')).toMatchObject({ refused: true, code: 'RERUN_OUTPUT_MISSING' });
  });
});

/**
 * `waitForTask`, `approveStep` and `rejectStep` against a real server running its loops: a wait ends
 * when the task does (a signal or a decision ends it, sent through the SDK), or with
 * `TdpWaitTimeoutError` while the task stays pending; decisions are taken as a person, once per key.
 */
import { Type } from 'typebox';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Harness, startHarness } from '../../../test/harness.ts';
import {
  createTdpClient,
  defineWorkflow,
  TdpApiError,
  type TdpClient,
  TdpWaitTimeoutError,
} from '../src/index.ts';

let h: Harness;
let tdp: TdpClient;

const signalled = defineWorkflow({ name: 'sdk-wait-signal', version: '1' }).builtIn('go', {
  kind: 'signal',
  signal: { name: 'go' },
});
const stuck = defineWorkflow({ name: 'sdk-wait-stuck', version: '1' }).step('never', {
  capability: 'nobody.runs',
  capabilityVersion: '1',
});
/** A workflow value with a TypeBox input schema: it types createTask's input and waitForResult's outputs. */
const typed = defineWorkflow({
  name: 'sdk-wait-typed',
  version: '1',
  inputSchema: Type.Object({ orderId: Type.String() }),
}).builtIn('go', { kind: 'signal', signal: { name: 'go' } });
const reviewed = defineWorkflow({ name: 'sdk-review', version: '1' }).builtIn('review', {
  kind: 'approval',
  approval: { approvers: { users: ['rita'] }, required: 1 },
});

beforeAll(async () => {
  h = await startHarness({ runLoops: true });
  const app = await h.createApplication();
  tdp = createTdpClient({ baseUrl: h.url, apiKey: app.apiKey, timeoutMs: 5_000, retries: 2 });
  for (const workflow of [signalled, stuck, reviewed, typed]) await tdp.publishWorkflowDefinition(workflow);
});
afterAll(() => h.close());

const submit = async (workflowName: string) =>
  (await tdp.createTask({ workflowName, workflowVersion: '1', name: 'a task', input: {}, ownerId: 'olga' }))
    .task.id;

/** Resolves once the task's step waits (for a signal, an approval). */
const waitsAt = (taskId: string, stepKey: string, kind: 'signal' | 'approval') =>
  expect
    .poll(async () => {
      const step = (await tdp.getTask(taskId)).execution.steps.find((s) => s.key === stepKey);
      return step?.waitingFor?.kind ?? null;
    })
    .toBe(kind);

/** The error a promise rejects with. */
const failureOf = (promise: Promise<unknown>) =>
  promise.then(
    () => {
      throw new Error('it resolved');
    },
    (error: unknown) => error,
  );

describe('waitForTask', () => {
  it('resolves with the task once it ends, from a wait begun while it was still waiting', async () => {
    const taskId = await submit('sdk-wait-signal');
    const ended = tdp.waitForTask(taskId, { timeoutMs: 20_000 });
    // The wait is under way before anything could end the task.
    await waitsAt(taskId, 'go', 'signal');
    await tdp.sendSignal(taskId, 'go', { ok: true });

    const view = await ended;
    expect(view.task.lifecycleStatus).toBe('SUCCEEDED');
    expect(view.execution.steps.find((s) => s.key === 'go')?.data).toEqual({ ok: true });
  });

  it('creates a task of a workflow value and waits for its result, the step outputs by key', async () => {
    const created = await tdp.createTask(typed, { name: 'an order', input: { orderId: 'o-1' } });
    expect(created.task).toMatchObject({
      workflowName: 'sdk-wait-typed',
      workflowVersion: '1',
      input: { orderId: 'o-1' },
    });
    const result = tdp.waitForResult(typed, created, { timeoutMs: 20_000 });
    await waitsAt(created.task.id, 'go', 'signal');
    await tdp.sendSignal(created.task.id, 'go', { paid: true });

    const { task, outputs } = await result;
    expect(task.lifecycleStatus).toBe('SUCCEEDED');
    expect(outputs).toEqual({ go: { paid: true } });
    // The TypeBox schema was published as the workflow's input schema: the server checks it too.
    const refused = await failureOf(
      tdp.createTask({ workflowName: 'sdk-wait-typed', workflowVersion: '1', name: 'bad', input: {} }),
    );
    expect(refused).toBeInstanceOf(TdpApiError);
    expect(refused).toMatchObject({ status: 422, code: 'INPUT_INVALID' });
  });

  it('rejects with TdpWaitTimeoutError for a task that stays pending, and stops on its signal', async () => {
    const taskId = await submit('sdk-wait-stuck');
    const error = await failureOf(tdp.waitForTask(taskId, { timeoutMs: 1_500 }));
    expect(error).toBeInstanceOf(TdpWaitTimeoutError);
    expect(error).toMatchObject({ taskId, timeoutMs: 1_500 });
    expect((error as TdpWaitTimeoutError).lastSeen?.task.lifecycleStatus).toBe('PENDING');
    expect((error as Error).message).toContain('did not end within 1500 ms');

    const stop = new AbortController();
    const stopped = failureOf(tdp.waitForTask(taskId, { timeoutMs: 20_000, signal: stop.signal }));
    stop.abort(new Error('the caller gave up'));
    expect(await stopped).toMatchObject({ message: 'the caller gave up' });
  });

  it('rejects at once with the API error for a task that is not there', async () => {
    const error = await failureOf(
      tdp.waitForTask('00000000-0000-4000-8000-000000000000', { timeoutMs: 20_000 }),
    );
    expect(error).toBeInstanceOf(TdpApiError);
    expect(error).toMatchObject({ code: 'TASK_NOT_FOUND' });
  });
});

describe('approveStep and rejectStep', () => {
  /** A task of `sdk-review` whose approval step waits, seen by rita (the approver) and mallory (not one). */
  async function waitingReview(): Promise<string> {
    const taskId = await submit('sdk-review');
    for (const person of ['rita', 'mallory'])
      await tdp.grantTaskAccess(taskId, { principalType: 'USER', principalId: person });
    await waitsAt(taskId, 'review', 'approval');
    return taskId;
  }

  it('approves as a person, once per idempotency key, and the task succeeds', async () => {
    const taskId = await waitingReview();
    const approved = await tdp.approveStep(taskId, 'review', {
      asUser: 'rita',
      comment: 'looks right',
      idempotencyKey: `approve-${taskId}`,
    });
    expect(approved).toMatchObject({
      taskId,
      stepKey: 'review',
      decision: 'APPROVE',
      decidedBy: 'user:rita',
      comment: 'looks right',
      outcome: 'APPROVED',
      replayed: false,
      idempotencyKey: `approve-${taskId}`,
    });
    const again = await tdp.approveStep(taskId, 'review', {
      asUser: { userId: 'rita' },
      comment: 'looks right',
      idempotencyKey: `approve-${taskId}`,
    });
    expect(again).toMatchObject({ decisionId: approved.decisionId, replayed: true });

    const view = await tdp.waitForTask(taskId, { timeoutMs: 20_000 });
    expect(view.task.lifecycleStatus).toBe('SUCCEEDED');
  });

  it('rejects as a person and the task fails; someone the approvers do not name is refused', async () => {
    const taskId = await waitingReview();
    const refused = await failureOf(tdp.rejectStep(taskId, 'review', { asUser: 'mallory' }));
    expect(refused).toBeInstanceOf(TdpApiError);
    expect(refused).toMatchObject({ code: 'NOT_AN_APPROVER', status: 403 });

    const rejected = await tdp.rejectStep(taskId, 'review', { asUser: 'rita', comment: 'wrong size' });
    expect(rejected).toMatchObject({ decision: 'REJECT', decidedBy: 'user:rita', outcome: 'REJECTED' });
    expect(rejected.idempotencyKey).not.toBe('');

    const view = await tdp.waitForTask(taskId, { timeoutMs: 20_000 });
    expect(view.task.lifecycleStatus).toBe('FAILED');
    expect(view.execution.steps.find((s) => s.key === 'review')?.error?.code).toBe('APPROVAL_REJECTED');
  });
});

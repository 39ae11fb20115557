/**
 * Child tasks (a step of kind `task`) on a real server, real PostgreSQL and a real worker: the parent's
 * step starts a task of another published workflow, waits for it (`waitingFor.childTaskId`), and ends
 * with it. A succeeded child gives its outputs to the parent. A failed one fails the parent or lets it
 * continue degraded, per the step's failure policy. A repeated begin starts no second child. Cancelling
 * the parent cancels the child. The publish check refuses a workflow that starts one never published.
 */
import { newId } from '@tdp/protocol';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Harness, startHarness } from '../../../test/harness.ts';
import {
  attemptEvent,
  completeWith,
  failWith,
  type StartCommand,
  startTestWorker,
} from '../../../test/testWorker.ts';
import { connectDatabase } from '../src/main.ts';

let h: Harness;
let sql: ReturnType<typeof connectDatabase>;
let app: Awaited<ReturnType<Harness['createApplication']>>;
let worker: Awaited<ReturnType<typeof startTestWorker>>;
const cancelCommands: string[] = [];

/** Opened by the test: a held `child.work` or `parent.prep` attempt waits for it. */
const gates = { child: deferred(), prep: deferred(), boom: deferred() };
function deferred() {
  let open!: () => void;
  const promise = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { promise, open };
}

export const childWorkflow = {
  name: 'child-double',
  version: '1',
  inputSchema: {
    type: 'object',
    required: ['value'],
    properties: { value: { type: 'number' }, mode: { type: 'string' } },
  },
  steps: [
    {
      key: 'double',
      capability: 'child.work',
      capabilityVersion: '1',
      inputMapping: { value: '$.input.value', mode: { from: '$.input.mode', optional: true } },
      retry: { maxAttempts: 1 },
    },
  ],
};

/** prep → sub (the child task) → after, which reads the child's output. */
export const parentWorkflow = (failurePolicy: string) => ({
  name: `parent-${failurePolicy.toLowerCase()}`,
  version: '1',
  steps: [
    {
      key: 'prep',
      capability: 'parent.prep',
      capabilityVersion: '1',
      inputMapping: { hold: '$.input.holdPrep' },
    },
    {
      key: 'sub',
      kind: 'task',
      dependsOn: ['prep'],
      failurePolicy,
      retry: { maxAttempts: 1 },
      task: {
        workflowName: 'child-double',
        workflowVersion: '1',
        inputMapping: { value: '$.input.value', mode: '$.input.mode' },
      },
    },
    {
      key: 'after',
      capability: 'parent.after',
      capabilityVersion: '1',
      dependsOn: ['sub'],
      inputMapping: { fromChild: '$.steps.sub.output.double' },
    },
  ].map((s) => ({ retry: { maxAttempts: 1 }, ...s })),
});

/** The child task and, beside it, a step that fails the parent (FAIL_TASK) once the test lets it. */
const siblingWorkflow = {
  name: 'parent-with-sibling',
  version: '1',
  steps: [
    {
      key: 'sub',
      kind: 'task',
      task: { workflowName: 'child-double', workflowVersion: '1', inputMapping: { value: 4, mode: 'hold' } },
    },
    { key: 'boom', capability: 'parent.boom', capabilityVersion: '1' },
  ].map((s) => ({ retry: { maxAttempts: 1 }, ...s })),
};

const handler = async (
  command: StartCommand,
  report: (events: Record<string, unknown>[]) => Promise<any>,
) => {
  const input = command.input as Record<string, any>;
  if (command.capability === 'parent.prep') {
    if (input.hold) await gates.prep.promise;
    return completeWith({ prepared: true })(command, report);
  }
  if (command.capability === 'parent.after') return completeWith({ got: input.fromChild })(command, report);
  if (command.capability === 'parent.boom') {
    await gates.boom.promise;
    return failWith({ category: 'INPUT', code: 'SIBLING_BROKE', retryable: false })(command, report);
  }
  if (input.mode === 'fail')
    return failWith({ category: 'INPUT', code: 'CHILD_BROKE', retryable: false })(command, report);
  if (input.mode === 'hold') {
    await report([attemptEvent(command, 'STEP_STARTED', 1)]);
    await gates.child.promise;
    return report([attemptEvent(command, 'STEP_COMPLETED', 2, { output: { doubled: input.value * 2 } })]);
  }
  return completeWith({ doubled: input.value * 2 })(command, report);
};

beforeAll(async () => {
  // A short cancel grace: a cancelled child whose worker does not stop ends once the test moves the clock.
  h = await startHarness({ runLoops: true, settings: { cancelGraceMs: 500 } });
  sql = connectDatabase({ url: h.databaseUrl, maxConnections: 2 });
  app = await h.createApplication();
  const workerKey = (
    await h.request('POST', '/admin/v1/worker-credentials', { token: h.adminToken, body: {} })
  ).body.key;
  for (const body of [
    childWorkflow,
    parentWorkflow('FAIL_TASK'),
    parentWorkflow('CONTINUE_WITH_WARNING'),
    siblingWorkflow,
  ]) {
    const published = await h.request('POST', '/v1/workflow-definitions', { token: app.apiKey, body });
    expect(published.status, JSON.stringify(published.body)).toBe(201);
  }
  worker = await startTestWorker({
    baseUrl: h.url,
    workerKey,
    nodeId: 'node-child',
    capabilities: ['child.work', 'parent.prep', 'parent.after', 'parent.boom'].map((name) => ({
      name,
      version: '1',
    })),
    handler,
    onCommand: (command) => {
      if (command.type === 'CANCEL_ATTEMPT') cancelCommands.push(command.attemptId);
    },
  });
});
afterAll(async () => {
  for (const gate of Object.values(gates)) gate.open();
  await worker?.stop();
  await sql?.end();
  await h.close();
});

const patience = { timeout: 15_000, interval: 50 };
const get = async (taskId: string) =>
  (await h.request('GET', `/v1/tasks/${taskId}`, { token: app.apiKey })).body;
const stepOf = (view: any, key: string) => view.execution.steps.find((s: any) => s.key === key);
const endOf = (taskId: string, lifecycle: string) =>
  expect.poll(async () => (await get(taskId)).task.lifecycleStatus, patience).toBe(lifecycle);
/** The parent's children, as `GET /v1/tasks?parentTaskId=` lists them. */
const childrenOf = async (taskId: string) =>
  (await h.request('GET', `/v1/tasks?parentTaskId=${taskId}`, { token: app.apiKey })).body.items.map(
    (t: any) => t.task.id as string,
  );
const workflowCounts = async (workflowId: string) => ({
  ...(await sql`SELECT task_count, task_counts FROM workflow WHERE id = ${workflowId}`)[0],
});

async function startParent(policy: string, input: Record<string, unknown>) {
  const created = await h.request('POST', '/v1/tasks', {
    token: app.apiKey,
    headers: { 'idempotency-key': newId() },
    body: {
      workflowName: `parent-${policy.toLowerCase()}`,
      workflowVersion: '1',
      name: 'a parent',
      input: { holdPrep: false, ...input },
      ownerId: 'owner-7',
    },
  });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  return created.body.task.id as string;
}

/** The parent's `sub` step once it waits for its child: the child's id, as GET shows it. */
async function waitingChild(parentId: string): Promise<string> {
  await expect
    .poll(async () => stepOf(await get(parentId), 'sub').waitingFor?.childTaskId, patience)
    .toBeTruthy();
  const sub = stepOf(await get(parentId), 'sub');
  expect(sub.status).toBe('RUNNING');
  expect(sub.waitingFor).toMatchObject({ kind: 'task' });
  expect(Date.parse(sub.waitingFor.since)).not.toBeNaN();
  return sub.waitingFor.childTaskId;
}

describe('a child task', () => {
  it('succeeds, and the parent continues with its outputs; the child has the parent, owner and ACL', async () => {
    const parentId = await startParent('FAIL_TASK', { value: 7, mode: 'ok', holdPrep: true });
    // The parent's ACL before the child starts: the child inherits it.
    const granted = await h.request('POST', `/v1/tasks/${parentId}/acl`, {
      token: app.apiKey,
      body: { principalType: 'USER', principalId: 'reviewer-1', permission: 'VIEW' },
    });
    expect(granted.status).toBe(204);
    gates.prep.open();
    await endOf(parentId, 'SUCCEEDED');
    const parent = await get(parentId);
    expect(stepOf(parent, 'sub')).toMatchObject({ status: 'SUCCEEDED', data: { double: { doubled: 14 } } });
    expect(stepOf(parent, 'after').data).toEqual({ got: { doubled: 14 } });
    expect(parent.task.parentTaskId).toBeNull();

    const children = await childrenOf(parentId);
    expect(children).toHaveLength(1);
    expect(await childrenOf(children[0]!)).toEqual([]);
    const badFilter = await h.request('GET', '/v1/tasks?parentTaskId=nope', { token: app.apiKey });
    expect(badFilter.status).toBe(400);
    expect(badFilter.headers.get('content-type')).toContain('application/problem+json');
    const child = await get(children[0]!);
    expect(child.task).toMatchObject({
      parentTaskId: parentId,
      workflowId: parent.task.workflowId,
      workflowName: 'child-double',
      ownerId: 'owner-7',
      input: { value: 7, mode: 'ok' },
      lifecycleStatus: 'SUCCEEDED',
    });
    expect(await workflowCounts(parent.task.workflowId)).toEqual({
      task_count: 2,
      task_counts: { SUCCEEDED: 2 },
    });
    const acl = await sql`
      SELECT principal_type, principal_id, permission FROM task_acl WHERE task_id = ${children[0]!}`;
    expect(acl.map((r) => ({ ...r }))).toEqual([
      { principal_type: 'USER', principal_id: 'reviewer-1', permission: 'VIEW' },
    ]);
    // Its own events: its creation names the parent.
    const events = (await h.request('GET', `/v1/tasks/${children[0]}/events`, { token: app.apiKey })).body;
    expect(events.items[0]).toMatchObject({ eventType: 'TASK_CREATED', payload: { parentTaskId: parentId } });
  });

  it('fails, and under FAIL_TASK the parent fails with CHILD_TASK_FAILED', async () => {
    const parentId = await startParent('FAIL_TASK', { value: 1, mode: 'fail' });
    await endOf(parentId, 'FAILED');
    const parent = await get(parentId);
    expect(parent.task.failure).toMatchObject({ code: 'CHILD_TASK_FAILED', failedStepId: 'sub' });
    expect(stepOf(parent, 'after').status).toBe('CANCELLED');
    const [childId] = await childrenOf(parentId);
    expect((await get(childId!)).task.failure).toMatchObject({ code: 'CHILD_BROKE' });
  });

  it('fails, and under CONTINUE_WITH_WARNING the parent goes on, degraded', async () => {
    const parentId = await startParent('CONTINUE_WITH_WARNING', { value: 1, mode: 'fail' });
    await endOf(parentId, 'SUCCEEDED');
    const parent = await get(parentId);
    expect(parent.task.health).toBe('DEGRADED');
    expect(stepOf(parent, 'sub')).toMatchObject({ status: 'FAILED', error: { code: 'CHILD_TASK_FAILED' } });
  });

  it('whose input fails the child workflow’s schema fails the step and starts no child', async () => {
    const parentId = await startParent('FAIL_TASK', { value: 'seven', mode: 'ok' });
    await endOf(parentId, 'FAILED');
    expect((await get(parentId)).task.failure).toMatchObject({ code: 'CHILD_INPUT_INVALID' });
    expect(await childrenOf(parentId)).toEqual([]);
  });

  it('is started once per step attempt, however often the step begins', async () => {
    gates.child = deferred();
    const parentId = await startParent('FAIL_TASK', { value: 5, mode: 'hold' });
    const childId = await waitingChild(parentId);
    // The step's begin again, as a timer fired twice (a crash between its commit and its bookkeeping).
    const sub = stepOf(await get(parentId), 'sub');
    const [again] = await sql`
      INSERT INTO timer (id, kind, task_id, step_id, payload, available_at, created_at)
      VALUES (${newId()}, 'STEP_BEGIN', ${parentId}, ${sub.id}, ${sql.json({ stepKey: 'sub', attempt: 1 })},
              ${new Date(h.clock.now().getTime() - 1000)}, ${h.clock.now()})
      RETURNING id`;
    await expect
      .poll(async () => (await sql`SELECT status FROM timer WHERE id = ${again!.id}`)[0]?.status, patience)
      .toBe('PUBLISHED');
    expect(await childrenOf(parentId)).toEqual([childId]);
    gates.child.open();
    await endOf(parentId, 'SUCCEEDED');
    expect(await childrenOf(parentId)).toEqual([childId]);
    expect(stepOf(await get(parentId), 'after').data).toEqual({ got: { doubled: 10 } });
  });

  it('is cancelled with its parent, and its worker is told to stop', async () => {
    gates.child = deferred();
    const parentId = await startParent('FAIL_TASK', { value: 3, mode: 'hold' });
    const childId = await waitingChild(parentId);
    await expect.poll(() => worker.received.some((c) => c.taskId === childId), patience).toBe(true);
    const attemptId = worker.received.find((c) => c.taskId === childId)!.attemptId;
    const cancelled = await h.request('POST', `/v1/tasks/${parentId}:cancel`, {
      token: app.apiKey,
      body: { reason: 'not needed' },
    });
    expect(cancelled.status).toBe(200);
    // The child is cancelled as its application would cancel it: its worker is told to stop …
    await expect.poll(() => cancelCommands.includes(attemptId), patience).toBe(true);
    // … and, as that worker does not stop, the child ends when its grace period has passed.
    h.clock.advance(1_000);
    await endOf(childId, 'CANCELLED');
    await endOf(parentId, 'CANCELLED');
    expect(stepOf(await get(parentId), 'sub').status).toBe('CANCELLED');
    gates.child.open();
  });

  it('is cancelled when a sibling step fails its parent', async () => {
    gates.child = deferred();
    const created = await h.request('POST', '/v1/tasks', {
      token: app.apiKey,
      headers: { 'idempotency-key': newId() },
      body: { workflowName: 'parent-with-sibling', workflowVersion: '1', name: 'a parent', input: {} },
    });
    expect(created.status).toBe(201);
    const parentId = created.body.task.id as string;
    const childId = await waitingChild(parentId);
    await expect.poll(() => worker.received.some((c) => c.taskId === childId), patience).toBe(true);
    const attemptId = worker.received.find((c) => c.taskId === childId)!.attemptId;
    gates.boom.open();
    await endOf(parentId, 'FAILED');
    expect((await get(parentId)).task.failure).toMatchObject({ code: 'SIBLING_BROKE', failedStepId: 'boom' });
    await expect.poll(() => cancelCommands.includes(attemptId), patience).toBe(true);
    h.clock.advance(1_000);
    await endOf(childId, 'CANCELLED');
    gates.child.open();
    // Created with a step running at once beside one placed at once: the workflow counts both tasks.
    expect(await workflowCounts((await get(parentId)).task.workflowId)).toEqual({
      task_count: 2,
      task_counts: { FAILED: 1, CANCELLED: 1 },
    });
  });
});

describe('publishing a workflow with a child-task step', () => {
  it('refuses one whose child workflow is not published, naming the step, and stores nothing', async () => {
    const body = {
      ...parentWorkflow('FAIL_TASK'),
      name: 'parent-of-nothing',
      steps: [{ key: 'sub', kind: 'task', task: { workflowName: 'never-published', workflowVersion: '1' } }],
    };
    const refused = await h.request('POST', '/v1/workflow-definitions', { token: app.apiKey, body });
    expect(refused.status).toBe(422);
    expect(refused.headers.get('content-type')).toContain('application/problem+json');
    expect(refused.body.code).toBe('WORKFLOW_DEFINITION_INVALID');
    expect(refused.body.errors).toEqual([
      {
        path: '/steps/0/task',
        message: 'step "sub" starts workflow "never-published" version "1", which is not published',
      },
    ]);
    const stored = await h.request('GET', '/v1/workflow-definitions/parent-of-nothing/versions/1', {
      token: app.apiKey,
    });
    expect(stored.status).toBe(404);
  });
});

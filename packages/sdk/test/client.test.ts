/** Every operation of the SDK's client against a real server, and its problems as typed errors. */
import { newId } from '@tdp/protocol';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Harness, startHarness } from '../../../test/harness.ts';
import { createTdpClient, defineWorkflow, TdpApiError, type TdpClient } from '../src/index.ts';

let h: Harness;
let tdp: TdpClient;

const workflow = defineWorkflow({ name: 'sdk-client', version: '1', description: 'two steps nobody runs' })
  .step('first', { capability: 'nobody.first', capabilityVersion: '1', inputMapping: { n: '$.input.n' } })
  .step('second', {
    capability: 'nobody.second',
    capabilityVersion: '1',
    dependsOn: ['first'],
    inputMapping: { value: '$.steps.first.output.value', fixed: 3 },
    retry: { maxAttempts: 2 },
    timeouts: { startToCloseMs: 60_000 },
    failurePolicy: 'CONTINUE_WITH_WARNING',
    affinity: { requiredLabels: { zone: 'a' } },
  });

const newTask = (extra: Record<string, unknown> = {}) =>
  tdp.createTask({
    workflowName: 'sdk-client',
    workflowVersion: '1',
    name: 'a task',
    input: { n: 1 },
    ...extra,
  });

/** The error a call rejects with. */
const failureOf = (call: Promise<unknown>) =>
  call.then(
    () => {
      throw new Error('the call succeeded');
    },
    (error: unknown) => error as TdpApiError,
  );

beforeAll(async () => {
  h = await startHarness({ allowInsecureCallbacks: true });
  const app = await h.createApplication();
  tdp = createTdpClient({ baseUrl: h.url, apiKey: app.apiKey, timeoutMs: 5_000, retries: 2 });
});
afterAll(() => h.close());

describe('workflow definitions', () => {
  it('publishes a defineWorkflow() result, again without change, lists and reads it', async () => {
    const first = await tdp.publishWorkflowDefinition(workflow);
    expect(first.created).toBe(true);
    expect(first.definition.steps.map((s) => [s.key, s.dependsOn, s.failurePolicy])).toEqual([
      ['first', [], 'FAIL_TASK'],
      ['second', ['first'], 'CONTINUE_WITH_WARNING'],
    ]);
    expect(first.definition.steps[1]!.inputMapping).toEqual({
      value: '$.steps.first.output.value',
      fixed: 3,
    });
    expect(first.definition.steps[1]!.retry.maxAttempts).toBe(2);
    expect((await tdp.publishWorkflowDefinition(workflow)).created).toBe(false);

    const listed = await tdp.listWorkflowDefinitions({ name: 'sdk-client' });
    expect(listed.items.map((d) => d.id)).toEqual([first.definition.id]);
    expect(listed.nextCursor).toBeNull();
    expect((await tdp.getWorkflowDefinition('sdk-client', '1')).id).toBe(first.definition.id);
  });

  it('answers an invalid definition and a changed version with typed errors', async () => {
    const invalid = defineWorkflow({ name: 'sdk-invalid', version: '1' }).step('only', {
      capability: 'nobody.first',
      capabilityVersion: '1',
      retry: { initialBackoffMs: 5_000, maxBackoffMs: 10 },
    });
    const error = await failureOf(tdp.publishWorkflowDefinition(invalid));
    expect(error).toBeInstanceOf(TdpApiError);
    expect(error).toMatchObject({ code: 'WORKFLOW_DEFINITION_INVALID', status: 422, retryable: false });
    expect(error.errors.map((e) => e.path)).toEqual(['/steps/0/retry/maxBackoffMs']);

    const changed = defineWorkflow({ name: 'sdk-client', version: '1', description: 'other content' }).step(
      'first',
      { capability: 'nobody.first', capabilityVersion: '1' },
    );
    expect(await failureOf(tdp.publishWorkflowDefinition(changed))).toMatchObject({
      code: 'WORKFLOW_VERSION_EXISTS',
      status: 409,
    });
    expect(await failureOf(tdp.getWorkflowDefinition('sdk-client', '9'))).toMatchObject({
      code: 'WORKFLOW_DEFINITION_NOT_FOUND',
      status: 404,
    });
  });
});

describe('tasks', () => {
  it('creates once per idempotency key, reads, lists, cancels and retries', async () => {
    const idempotencyKey = `order-${newId()}`;
    const created = await newTask({ externalRef: idempotencyKey });
    expect(created.replayed).toBe(false);
    const again = await tdp.createTask(
      {
        workflowName: 'sdk-client',
        workflowVersion: '1',
        name: 'a task',
        input: { n: 1 },
        externalRef: idempotencyKey,
      },
      { idempotencyKey: created.idempotencyKey },
    );
    expect(again).toMatchObject({ replayed: true, idempotencyKey: created.idempotencyKey });
    expect(again.task.id).toBe(created.task.id);

    expect((await tdp.getTask(created.task.id)).execution.steps.map((s) => s.key)).toEqual([
      'first',
      'second',
    ]);
    const page = await tdp.listTasks({ externalRef: idempotencyKey });
    expect(page.items.map((t) => t.task.id)).toEqual([created.task.id]);
    expect((await tdp.listTasks({ limit: 1, status: 'PENDING' })).items).toHaveLength(1);

    const canceled = await tdp.cancelTask(created.task.id, { reason: 'changed my mind' });
    expect(canceled.task.lifecycleStatus).toBe('CANCELLED');
    expect((await tdp.cancelTask(created.task.id)).task.lifecycleStatus).toBe('CANCELLED');
    const retried = await tdp.retryTask(created.task.id);
    expect(retried.execution.number).toBe(2);
  });

  it('answers typed errors: 404, 409 and 400', async () => {
    expect(await failureOf(tdp.getTask(newId()))).toMatchObject({ code: 'TASK_NOT_FOUND', status: 404 });
    const key = newId();
    await tdp.createTask(
      { workflowName: 'sdk-client', workflowVersion: '1', name: 'one' },
      { idempotencyKey: key },
    );
    expect(
      await failureOf(
        tdp.createTask(
          { workflowName: 'sdk-client', workflowVersion: '1', name: 'two' },
          { idempotencyKey: key },
        ),
      ),
    ).toMatchObject({ code: 'IDEMPOTENCY_KEY_REUSED', status: 409, retryable: false });
    const invalid = await failureOf(
      tdp.createTask(
        { workflowName: 'sdk-client', workflowVersion: '1', name: '' },
        { idempotencyKey: newId() },
      ),
    );
    expect(invalid).toMatchObject({ code: 'VALIDATION_FAILED', status: 400, retryable: false });
    expect(invalid.detail).not.toBe('');
  });

  it('reads events, the timeline, statuses in batch, and classifies at a version', async () => {
    const { task } = await newTask();
    const events = await tdp.listTaskEvents(task.id, { limit: 10 });
    expect(events.taskId).toBe(task.id);
    expect(events.items.length).toBeGreaterThan(0);
    expect((await tdp.getTaskTimeline(task.id)).map((e) => e.kind)).toContain('CREATED');

    const batch = await tdp.batchGetTaskStatus([{ taskId: task.id }, { taskId: newId() }]);
    expect(batch.items.map((i) => i.found)).toEqual([true, false]);
    const known = batch.items[0]!.taskVersion!;
    const unchanged = await tdp.batchGetTaskStatus([{ taskId: task.id, knownVersion: known }]);
    expect(unchanged.items[0]).toMatchObject({ changed: false });

    const classified = await tdp.classifyTask(task.id, known, { productId: 'photos' });
    expect(classified.task.productId).toBe('photos');
    expect(await failureOf(tdp.classifyTask(task.id, known, { productId: 'again' }))).toMatchObject({
      code: 'VERSION_MISMATCH',
      status: 412,
    });
  });

  it('lists callback deliveries and redelivers one', async () => {
    const { task } = await newTask({ callbackUrl: 'http://127.0.0.1:9/tdp/callback' });
    const deliveries = await tdp.listCallbackDeliveries(task.id);
    expect(deliveries.map((d) => [d.sequence, d.eventType])).toEqual([[1, 'execution.created']]);
    await tdp.redeliverCallback(deliveries[0]!.id);
    expect(await failureOf(tdp.redeliverCallback(newId()))).toMatchObject({ code: 'TASK_NOT_FOUND' });
  });

  it('maps external references to tasks', async () => {
    const { task } = await newTask();
    const ref = `inv-${newId()}`;
    await tdp.setExternalRef(task.id, 'invoice', ref);
    expect(await tdp.findTaskByExternalRef('invoice', ref)).toBe(task.id);
    expect(await failureOf(tdp.findTaskByExternalRef('invoice', 'none'))).toMatchObject({
      code: 'TASK_NOT_FOUND',
    });
  });
});

describe('status workflows, access and tokens', () => {
  it('creates a workflow, adds a task, reads it; grants and revokes access', async () => {
    const request = {
      clientWorkflowKey: `wf-${newId()}`,
      ownerId: 'owner-1',
      title: 'A batch of reports',
      initialTasks: [{ clientTaskKey: 'report-1', title: 'Report 1' }],
    };
    const created = await tdp.createWorkflow(request);
    expect(created).toMatchObject({ created: true, tasks: [{ clientTaskKey: 'report-1' }] });
    expect((await tdp.createWorkflow(request)).created).toBe(false);
    const added = await tdp.addWorkflowTask(created.workflowId, {
      clientTaskKey: 'report-2',
      title: 'Report 2',
    });
    expect(added.created).toBe(true);
    const view = await tdp.getWorkflow(created.workflowId);
    expect(view.tasks.map((t) => t.title).sort()).toEqual(['Report 1', 'Report 2']);

    const taskId = added.taskId;
    const viewer = await tdp.createUserToken({ userId: 'someone-else' });
    const seenBy = (token: string) =>
      fetch(`${h.url}/v1/workflows/${created.workflowId}`, { headers: { authorization: `Bearer ${token}` } })
        .then((r) => r.json() as Promise<{ tasks?: { taskId: string }[] }>)
        .then((body) => (body.tasks ?? []).map((t) => t.taskId));
    expect(await seenBy(viewer.token)).not.toContain(taskId);
    await tdp.grantTaskAccess(taskId, { principalType: 'USER', principalId: 'someone-else' });
    expect(await seenBy(viewer.token)).toContain(taskId);
    await tdp.revokeTaskAccess(taskId, 'USER', 'someone-else');
    expect(await seenBy(viewer.token)).not.toContain(taskId);
  });

  it('hands out connection, subscription and user tokens', async () => {
    const connection = await tdp.createConnectionToken('user-7');
    expect(connection.token.split('.')).toHaveLength(3);
    expect(connection.url).toMatch(/^ws:\/\//);
    // The person's own channel, and the broadcasts of their tenant and of the system.
    expect(connection.channels).toHaveLength(3);
    expect(connection.channels).toEqual(
      expect.arrayContaining([expect.stringMatching(/^task_tenant:/), 'task_system:public']),
    );

    const { task } = await newTask({ ownerId: 'user-7' });
    const subscription = await tdp.createSubscriptionToken({ userId: 'user-7', taskId: task.id });
    expect(subscription.channel).toContain(task.id);
    expect(await failureOf(tdp.createSubscriptionToken({ userId: 'user-8', taskId: task.id }))).toMatchObject(
      {
        code: 'TASK_NOT_FOUND',
      },
    );

    const user = await tdp.createUserToken({ userId: 'user-7', ttlSeconds: 60 });
    expect(Date.parse(user.expiresAt)).toBeGreaterThan(Date.now() - 1000);
    const mine = await fetch(`${h.url}/v1/me/tasks`, { headers: { authorization: `Bearer ${user.token}` } });
    expect(mine.status).toBe(200);
  });

  it('broadcasts to the tenant once per idempotency key; another notice with the key is 409', async () => {
    const notice = { title: 'Maintenance', message: 'Tonight', severity: 'INFO' as const };
    const first = await tdp.broadcastToTenant(notice, { idempotencyKey: 'sdk-broadcast-1' });
    expect(first.channel).toMatch(/^task_tenant:/);
    expect(await tdp.broadcastToTenant(notice, { idempotencyKey: 'sdk-broadcast-1' })).toEqual(first);
    expect(
      await failureOf(
        tdp.broadcastToTenant({ ...notice, message: 'Now' }, { idempotencyKey: 'sdk-broadcast-1' }),
      ),
    ).toMatchObject({ code: 'IDEMPOTENCY_KEY_REUSED', status: 409 });
    // Without a key each call is its own notice.
    expect((await tdp.broadcastToTenant(notice)).id).not.toBe(first.id);
  });

  it('refuses a wrong API key with UNAUTHENTICATED', async () => {
    const stranger = createTdpClient({ baseUrl: h.url, apiKey: 'tdp_not_a_key' });
    expect(await failureOf(stranger.listTasks())).toMatchObject({ code: 'UNAUTHENTICATED', status: 401 });
  });
});

describe('built-in steps, signals and schedules', () => {
  const waiting = defineWorkflow({ name: 'sdk-waits', version: '1' })
    .builtIn('nap', { kind: 'sleep', sleep: { durationMs: 1_000 } })
    .builtIn('go', { kind: 'signal', dependsOn: ['nap'], signal: { name: 'go' } })
    .step('use', {
      capability: 'nobody.use',
      capabilityVersion: '1',
      dependsOn: ['go'],
      inputMapping: { note: '$.steps.go.output.note' },
    });

  it('publishes built-in steps, sends a signal once per key, retries from a step', async () => {
    const published = await tdp.publishWorkflowDefinition(waiting);
    expect(published.definition.steps.map((s) => [s.key, s.kind ?? 'capability'])).toEqual([
      ['nap', 'sleep'],
      ['go', 'signal'],
      ['use', 'capability'],
    ]);
    const task = await tdp.createTask({ workflowName: 'sdk-waits', workflowVersion: '1', name: 'waits' });
    const sent = await tdp.sendSignal(task.task.id, 'go', { note: 'early' }, { idempotencyKey: 'go-1' });
    // This server runs no loops: the signal step has not begun, so the signal is kept for it.
    expect(sent.consumedByStep).toBeNull();
    const again = await tdp.sendSignal(task.task.id, 'go', { note: 'early' }, { idempotencyKey: 'go-1' });
    expect(again).toMatchObject({ signalId: sent.signalId, replayed: true });
    const unknown = await failureOf(tdp.sendSignal(task.task.id, 'stop', {}));
    expect(unknown).toBeInstanceOf(TdpApiError);
    expect(unknown.code).toBe('SIGNAL_UNKNOWN');
    const rerun = await failureOf(tdp.retryTask(task.task.id, { fromStep: 'nowhere' }));
    expect(rerun.status).toBeGreaterThanOrEqual(400);
  });

  it('creates, lists, pauses and resumes a schedule', async () => {
    const schedule = await tdp.schedules.create(
      {
        cron: '0 6 * * *',
        timeZone: 'Europe/Berlin',
        workflowName: 'sdk-waits',
        workflowVersion: '1',
        input: {},
        overlap: 'SKIP',
      },
      { idempotencyKey: 'daily' },
    );
    expect(schedule.cron).toBe('0 6 * * *');
    const listed = await tdp.schedules.list();
    expect(listed.schedules.map((s) => s.id)).toContain(schedule.id);
    expect((await tdp.schedules.pause(schedule.id)).paused).toBe(true);
    expect((await tdp.schedules.get(schedule.id)).paused).toBe(true);
    expect((await tdp.schedules.resume(schedule.id)).paused).toBe(false);
    const bad = await failureOf(
      tdp.schedules.create({
        cron: 'every day',
        timeZone: 'UTC',
        workflowName: 'sdk-waits',
        workflowVersion: '1',
        overlap: 'SKIP',
      }),
    );
    expect(bad.code).toBe('CRON_EXPRESSION_INVALID');
  });
});

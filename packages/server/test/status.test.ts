/**
 * The status service against a real PostgreSQL. Each test name states one correctness rule of the
 * service (the validation chain: docs/design/event-validation.md); rules that belong to other parts of
 * the system say where.
 */
import { newId } from '@tdp/protocol';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Harness, startHarness } from '../../../test/harness.ts';
import { coordinator, documentSteps } from '../../../test/statusFixture.ts';
import { connectDatabase } from '../src/main.ts';

let h: Harness;
let c: Awaited<ReturnType<typeof coordinator>>;
let sql: ReturnType<typeof connectDatabase>;

beforeAll(async () => {
  h = await startHarness();
  c = await coordinator(h);
  sql = connectDatabase({ url: h.databaseUrl, maxConnections: 2 });
});
afterAll(async () => {
  await sql.end();
  await h.close();
});

const counts = async (taskId: string) => {
  const [row] = await sql`
    SELECT (SELECT version FROM task WHERE id = ${taskId}) AS version,
           (SELECT count(*) FROM task_event WHERE task_id = ${taskId}) AS events,
           (SELECT count(*) FROM event_dedup WHERE task_id = ${taskId}) AS dedup,
           (SELECT count(*) FROM outbox_event WHERE aggregate_id = ${taskId}) AS outbox,
           (SELECT count(*) FROM realtime_message WHERE aggregate_id = ${taskId}) AS realtime`;
  return row!;
};

describe('identity and idempotency', () => {
  it('a retried eventId does not change the state a second time, and returns the first taskVersion', async () => {
    const { taskId, ctx } = await c.runningContext();
    const body = c.event(ctx);
    const first = await c.report(ctx, body);
    expect(first.status).toBe(200);
    expect(first.body).toMatchObject({
      accepted: true,
      duplicate: false,
      taskId,
      stepId: '01_prepare',
      lifecycleStatus: 'RUNNING',
    });
    const before = await counts(taskId);
    const again = await c.report(ctx, body);
    expect(again.body).toEqual({ ...first.body, duplicate: true });
    expect(await counts(taskId)).toEqual(before);
  });

  it('a producer resending its outbox after a restart gets the original answers, even after the step ended', async () => {
    const { taskId, ctx } = await c.runningContext();
    const started = c.event(ctx);
    const completed = c.event(ctx, { sourceSeq: 2, eventType: 'STEP_COMPLETED', durationMs: 1200 });
    const first = [await c.report(ctx, started), await c.report(ctx, completed)];
    const before = await counts(taskId);
    const resent = [await c.report(ctx, started), await c.report(ctx, completed)];
    expect(resent.map((r) => r.body)).toEqual(first.map((r) => ({ ...r.body, duplicate: true })));
    expect(await counts(taskId)).toEqual(before);
  });

  it('the same eventId with different content is rejected', async () => {
    const { taskId, ctx } = await c.runningContext();
    const body = c.event(ctx);
    await c.report(ctx, body);
    const before = await counts(taskId);
    const conflict = await c.report(ctx, { ...body, phaseCode: 'OTHER' });
    expect(conflict.status).toBe(409);
    expect(conflict.body.code).toBe('EVENT_ID_CONFLICT');
    expect(await counts(taskId)).toEqual(before);
  });

  it('the same clientWorkflowKey returns the same workflowId, and the same workflowId + clientTaskKey the same taskId', async () => {
    const key = `wf-${newId()}`;
    const first = await c.createWorkflow({ key });
    const again = await c.createWorkflow({ key });
    expect(again).toEqual({ ...first, created: false });
    const concurrent = await Promise.all(
      Array.from({ length: 5 }, () => c.createWorkflow({ key: `${key}-race` })),
    );
    expect(new Set(concurrent.map((w) => w.workflowId)).size).toBe(1);

    const spec = { clientTaskKey: 'extra', title: 'Extra task' };
    const added = await c.call('POST', `/v1/workflows/${first.workflowId}/tasks`, spec);
    expect(added.status).toBe(201);
    const addedAgain = await c.call('POST', `/v1/workflows/${first.workflowId}/tasks`, spec);
    expect(addedAgain.status).toBe(200);
    expect(addedAgain.body.taskId).toBe(added.body.taskId);
    const differentKey = await c.call('POST', '/v1/workflows', {
      clientWorkflowKey: key,
      ownerId: 'someone-else',
      title: 'x',
    });
    expect(differentKey.body.code).toBe('IDEMPOTENCY_KEY_REUSED');
  });

  it('a task cannot be moved to another workflow by changing workflowId in the request', async () => {
    const { taskId, ctx } = await c.runningContext();
    const other = await c.createWorkflow();
    const moved = await c.report(ctx, c.event(ctx, { workflowId: other.workflowId }));
    expect(moved.status).toBe(401);
    expect(moved.body.code).toBe('EXECUTION_CREDENTIAL_INVALID');
    expect((await c.task(taskId)).task.workflowId).toBe(ctx.workflowId);
  });

  it('envelope, step registry, execution context, token and current step must all match; a taskId alone is not enough', async () => {
    const { taskId, ctx } = await c.runningContext();
    const { ctx: otherCtx } = await c.runningContext();
    // Another task's token, naming this task.
    const foreign = await c.report(otherCtx, c.event(otherCtx, { taskId, workflowId: ctx.workflowId }));
    expect(foreign.body.code).toBe('EXECUTION_CREDENTIAL_INVALID');
    // This task's token, naming another step or attempt.
    expect((await c.report(ctx, c.event(ctx, { stepId: '02_parse' }))).body.code).toBe(
      'EXECUTION_CREDENTIAL_INVALID',
    );
    expect((await c.report(ctx, c.event(ctx, { stepAttempt: 2 }))).body.code).toBe(
      'EXECUTION_CREDENTIAL_INVALID',
    );
    // No credential at all, or a forged one.
    const anonymous = await h.request('POST', '/v1/task-events', { body: c.event(ctx) });
    expect(anonymous.body.code).toBe('EXECUTION_CREDENTIAL_INVALID');
    const forged = await c.report(
      { ...ctx, executionToken: `${ctx.executionToken.slice(0, -4)}AAAA` },
      c.event(ctx),
    );
    expect(forged.body.code).toBe('EXECUTION_CREDENTIAL_INVALID');
    expect((await c.task(taskId)).task.version).toBe(ctx.taskVersion);
  });

  it('tasks with null productId and taskType can be created, queried, notified and completed', async () => {
    const wf = await c.createWorkflow({
      tasks: [
        { clientTaskKey: 'generic', title: 'Generic', taskType: null, productId: null, knownSteps: [] },
      ],
    });
    const taskId = wf.tasks[0]!.taskId;
    const read = await c.task(taskId);
    expect(read.task).toMatchObject({
      taskType: null,
      productId: null,
      lifecycleStatus: 'PENDING',
      businessStatus: 'PENDING',
    });
    const done = await c.call('POST', '/v1/task-events', {
      eventId: newId(),
      taskId,
      producerId: 'task-coordinator',
      sourceSeq: 1,
      eventType: 'TASK_COMPLETED',
      durationMs: 42600,
    });
    expect(done.body).toMatchObject({
      accepted: true,
      lifecycleStatus: 'SUCCEEDED',
      businessStatus: 'SUCCEEDED',
      taskVersion: '2',
    });
    const rows =
      await sql`SELECT projection, payload FROM realtime_message WHERE aggregate_id = ${taskId} AND aggregate_version = 2`;
    // The operators' summary goes to the platform's channel and the tenant's.
    expect(rows.map((r) => r.projection).sort()).toEqual([
      'OPERATOR_SUMMARY',
      'OPERATOR_SUMMARY',
      'TASK_DETAIL',
      'USER_SUMMARY',
    ]);
    expect(rows.find((r) => r.projection === 'USER_SUMMARY')!.payload).toMatchObject({
      lifecycleStatus: 'SUCCEEDED',
      taskType: null,
      notice: { kind: 'TASK_SUCCEEDED' },
    });
  });
});

describe('dynamic steps', () => {
  const withPolicy = (policy: Record<string, unknown>) =>
    c.createWorkflow({
      tasks: [
        {
          clientTaskKey: 'agent',
          title: 'Research agent',
          knownSteps: [{ stepId: 'agent', operationCode: 'AGENT.RUN', expectedProducer: 'agent-service' }],
          dynamicRegistrationPolicy: policy,
        },
      ],
    });

  it('the same clientStepKey + attempt returns the same dynamic execution', async () => {
    const wf = await withPolicy({ allowedChildOperations: ['SEARCH.*'] });
    const taskId = wf.tasks[0]!.taskId;
    const body = {
      clientStepKey: 'tool-call-17',
      operationCode: 'SEARCH.WEB',
      producerId: 'search-service',
      attempt: 1,
    };
    const first = await c.call('POST', `/v1/tasks/${taskId}/executions:register`, body);
    expect(first.status).toBe(201);
    expect(first.body).toMatchObject({
      stepId: 'dyn_tool-call-17',
      created: true,
      operationCode: 'SEARCH.WEB',
    });
    const again = await c.call('POST', `/v1/tasks/${taskId}/executions:register`, body);
    expect(again.status).toBe(200);
    expect(again.body.executionId).toBe(first.body.executionId);
    expect(again.body.executionHandle).toBe(first.body.executionHandle);
    const steps = (await c.task(taskId)).execution.steps.filter((s: any) => s.dynamic);
    expect(steps).toHaveLength(1);
  });

  it('an unregistered status event cannot implicitly create a stepId or execution', async () => {
    const { taskId, ctx } = await c.runningContext();
    const before = await counts(taskId);
    // The coordinator's key cannot report step events for steps it never activated or registered.
    const viaKey = await c.call('POST', '/v1/task-events', {
      ...c.event(ctx, { stepId: 'invented_step' }),
      executionId: undefined,
    });
    expect(viaKey.body.code).toBe('EVENT_TYPE_NOT_ALLOWED');
    // A handle that was never issued.
    const handle = await c.call('POST', '/v1/task-events', {
      executionHandle: `exh_${'x'.repeat(32)}`,
      eventId: newId(),
      eventType: 'STEP_STARTED',
      sourceSeq: 1,
    });
    expect(handle.body.code).toBe('EXECUTION_CREDENTIAL_INVALID');
    // Activating a step the task never declared.
    const unknown = await c.call('POST', `/v1/tasks/${taskId}/steps/invented_step:activate`);
    expect(unknown.status).toBe(404);
    expect(unknown.body.code).toBe('STEP_NOT_REGISTERED');
    expect(await counts(taskId)).toEqual(before);
    expect((await c.task(taskId)).execution.steps.map((s: any) => s.key)).toEqual(['01_prepare', '02_parse']);
  });

  it('dynamic steps are limited by allowed operations, count, depth, parallelism and registration rate', async () => {
    const wf = await withPolicy({
      allowedParentOperations: ['AGENT.*'],
      allowedChildOperations: ['SEARCH.*', 'TOOL.*'],
      maxDynamicSteps: 3,
      maxDepth: 1,
      maxParallelExecutions: 3,
      registrationsPerMinute: 100,
    });
    const taskId = wf.tasks[0]!.taskId;
    const agent = await c.activate(taskId, 'agent');
    const register = (body: Record<string, unknown>, token = c.app.apiKey) =>
      h.request('POST', `/v1/tasks/${taskId}/executions:register`, {
        token,
        body: { producerId: 'search-service', operationCode: 'SEARCH.WEB', ...body },
      });

    expect((await register({ clientStepKey: 'x', operationCode: 'VIDEO.TRANSCODE' })).body.code).toBe(
      'OPERATION_NOT_ALLOWED',
    );
    // A parent execution of an allowed operation registers a child with its own token.
    const child = await register(
      { clientStepKey: 'c1', parentExecutionId: agent.executionId },
      agent.executionToken,
    );
    expect(child.status).toBe(201);
    // Depth: a child of the child would be depth 2.
    expect(
      (await register({ clientStepKey: 'c2', parentExecutionId: child.body.executionId })).body.code,
    ).toBe('DYNAMIC_STEP_LIMIT');
    // A child's token is not an allowed parent (SEARCH.* is not in allowedParentOperations).
    expect(
      (
        await register(
          { clientStepKey: 'c3', parentExecutionId: child.body.executionId },
          child.body.executionToken,
        )
      ).body.code,
    ).toBe('OPERATION_NOT_ALLOWED');
    // Parallelism: agent + c1 + c4 are open; the next one is refused.
    expect((await register({ clientStepKey: 'c4' })).status).toBe(201);
    expect((await register({ clientStepKey: 'c5' })).body.code).toBe('DYNAMIC_STEP_LIMIT');

    const rated = await withPolicy({ registrationsPerMinute: 2, maxParallelExecutions: 50 });
    const ratedTask = rated.tasks[0]!.taskId;
    const fast = (key: string) =>
      h.request('POST', `/v1/tasks/${ratedTask}/executions:register`, {
        token: c.app.apiKey,
        body: { clientStepKey: key, operationCode: 'TOOL.RUN', producerId: 'tool' },
      });
    expect((await fast('a')).status).toBe(201);
    expect((await fast('b')).status).toBe(201);
    const limited = await fast('c');
    expect(limited.status).toBe(429);
    expect(limited.body.code).toBe('REGISTRATION_RATE_LIMITED');
    h.clock.advance(61_000);
    expect((await fast('c')).status).toBe(201);

    const counted = await withPolicy({ maxDynamicSteps: 1 });
    const countedTask = counted.tasks[0]!.taskId;
    const reg = (key: string) =>
      h.request('POST', `/v1/tasks/${countedTask}/executions:register`, {
        token: c.app.apiKey,
        body: { clientStepKey: key, operationCode: 'TOOL.RUN', producerId: 'tool' },
      });
    expect((await reg('one')).status).toBe(201);
    expect((await reg('two')).body.code).toBe('DYNAMIC_STEP_LIMIT');
  });
});

describe('the validation chain', () => {
  it('only progress that leaves status and health as they were is marked coalescable for slow clients', async () => {
    const { taskId, ctx } = await c.runningContext();
    await c.report(ctx, c.event(ctx));
    const progress = (sourceSeq: number) =>
      c.report(
        ctx,
        c.event(ctx, { sourceSeq, eventType: 'STEP_PROGRESS', progress: { current: sourceSeq, total: 9 } }),
      );
    expect((await progress(2)).status).toBe(200);
    expect((await progress(3)).status).toBe(200);
    const rows = await sql<{ aggregate_version: string; projection: string; payload: any }[]>`
      SELECT aggregate_version, projection, payload FROM realtime_message
      WHERE aggregate_id = ${taskId} ORDER BY aggregate_version, projection`;
    const last = BigInt(rows.at(-1)!.aggregate_version);
    const marked = rows.filter((r) => r.payload.coalesceKey !== undefined);
    expect(marked.map((r) => [BigInt(r.aggregate_version), r.projection])).toEqual([
      [last - 1n, 'OPERATOR_SUMMARY'],
      [last - 1n, 'OPERATOR_SUMMARY'],
      [last - 1n, 'TASK_DETAIL'],
      [last - 1n, 'USER_SUMMARY'],
      [last, 'OPERATOR_SUMMARY'],
      [last, 'OPERATOR_SUMMARY'],
      [last, 'TASK_DETAIL'],
      [last, 'USER_SUMMARY'],
    ]);
    expect(marked.every((r) => r.payload.coalesceKey === taskId)).toBe(true);
    // Creation, the start and everything else before the progress reports carry no marker.
    expect(rows.filter((r) => BigInt(r.aggregate_version) < last - 1n).length).toBeGreaterThan(0);
  });

  it('a free phaseCode only updates progress metadata; it cannot declare an end, a severity or a failure policy', async () => {
    const { taskId, ctx } = await c.runningContext();
    await c.report(ctx, c.event(ctx));
    const progress = await c.report(
      ctx,
      c.event(ctx, {
        sourceSeq: 2,
        eventType: 'STEP_PROGRESS',
        phaseCode: 'COMPLETED',
        phaseLabel: 'page 37 of 200',
        progress: { current: 37, total: 200, unit: 'page' },
      }),
    );
    expect(progress.body.lifecycleStatus).toBe('RUNNING');
    const task = await c.task(taskId);
    const step = task.execution.steps.find((s: any) => s.key === '01_prepare');
    expect(step).toMatchObject({
      status: 'RUNNING',
      phaseCode: 'COMPLETED',
      phaseLabel: 'page 37 of 200',
      health: 'HEALTHY',
      progress: { current: 37, total: 200 },
    });
    expect(task.task).toMatchObject({ lifecycleStatus: 'RUNNING', health: 'HEALTHY' });
    const unknownField = await c.report(
      ctx,
      c.event(ctx, { sourceSeq: 3, eventType: 'STEP_PROGRESS', severity: 'ERROR' }),
    );
    expect(unknownField.status).toBe(400);
  });

  it("a worker's token cannot send TASK_COMPLETED (EVENT_TYPE_NOT_ALLOWED)", async () => {
    const { ctx } = await c.runningContext();
    const res = await c.report(ctx, c.event(ctx, { eventType: 'TASK_COMPLETED' }));
    expect(res.status).toBe(403);
    expect(res.body.code).toBe('EVENT_TYPE_NOT_ALLOWED');
  });

  it('token, step definition and the request operationCode / producerId must agree', async () => {
    const { ctx } = await c.runningContext();
    expect((await c.report(ctx, c.event(ctx, { operationCode: 'VIDEO.TRANSCODE' }))).body.code).toBe(
      'OPERATION_MISMATCH',
    );
    expect((await c.report(ctx, c.event(ctx, { producerId: 'document-parser' }))).body.code).toBe(
      'PRODUCER_MISMATCH',
    );
  });

  it("service A's sourceSeq=2 does not make service B's sourceSeq=1 look old; a producer's own regression is refused", async () => {
    const wf = await c.createWorkflow({
      tasks: [
        {
          clientTaskKey: 'two',
          title: 'Two services',
          knownSteps: [documentSteps[0], { ...documentSteps[1], dependsOn: [] }],
        },
      ],
    });
    const taskId = wf.tasks[0]!.taskId;
    const a = await c.activate(taskId, '01_prepare');
    const b = await c.activate(taskId, '02_parse');
    expect((await c.report(a, c.event(a, { sourceSeq: 1 }))).status).toBe(200);
    expect((await c.report(a, c.event(a, { sourceSeq: 2, eventType: 'STEP_PROGRESS' }))).status).toBe(200);
    expect((await c.report(b, c.event(b, { sourceSeq: 1 }))).status).toBe(200);
    const regression = await c.report(a, c.event(a, { sourceSeq: 2, eventType: 'STEP_PROGRESS' }));
    expect(regression.status).toBe(409);
    expect(regression.body.code).toBe('SOURCE_SEQ_REGRESSION');
  });

  it('an old attempt, an old sourceSeq and an old version cannot overwrite the new state (STALE_EXECUTION)', async () => {
    const { taskId, ctx } = await c.runningContext();
    await c.report(ctx, c.event(ctx));
    await c.report(
      ctx,
      c.event(ctx, {
        sourceSeq: 2,
        eventType: 'STEP_FAILED',
        error: { category: 'DEPENDENCY', code: 'TIMEOUT', retryable: true },
      }),
    );
    const retry = await c.activate(taskId, '01_prepare', 2);
    expect(retry.stepAttempt).toBe(2);
    expect(retry.executionId).not.toBe(ctx.executionId);
    // The first attempt's late completion is stale, even with a fresh sourceSeq.
    const late = await c.report(ctx, c.event(ctx, { sourceSeq: 3, eventType: 'STEP_COMPLETED' }));
    expect(late.status).toBe(409);
    expect(late.body.code).toBe('STALE_EXECUTION');
    expect((await c.report(retry, c.event(retry))).body.lifecycleStatus).toBe('RUNNING');
    const steps = (await c.task(taskId)).execution.steps;
    expect(steps.find((s: any) => s.key === '01_prepare')).toMatchObject({ attempt: 2, status: 'RUNNING' });
  });

  it('terminal states never go back to running; the coordinator alone ends the task', async () => {
    const { taskId, ctx } = await c.runningContext();
    await c.report(ctx, c.event(ctx));
    await c.report(ctx, c.event(ctx, { sourceSeq: 2, eventType: 'STEP_COMPLETED' }));
    const again = await c.report(ctx, c.event(ctx, { sourceSeq: 3, eventType: 'STEP_PROGRESS' }));
    expect(again.body.code).toBe('INVALID_TRANSITION');
    const coordinatorEvent = (seq: number, type: string) =>
      c.call('POST', '/v1/task-events', {
        eventId: newId(),
        taskId,
        producerId: 'coordinator',
        sourceSeq: seq,
        eventType: type,
      });
    expect((await coordinatorEvent(1, 'TASK_COMPLETED')).body.lifecycleStatus).toBe('SUCCEEDED');
    const reopen = await coordinatorEvent(2, 'TASK_FAILED');
    expect(reopen.status).toBe(409);
    expect(reopen.body.code).toBe('INVALID_TRANSITION');
    expect((await c.task(taskId)).task.lifecycleStatus).toBe('SUCCEEDED');
  });

  it('only a registered data.schema is accepted and validated; the registry rejects a video schema on a document operation', async () => {
    const admin = (body: Record<string, unknown>) =>
      h.request('POST', `/admin/v1/applications/${c.app.applicationId}/operation-definitions`, {
        token: h.adminToken,
        body,
      });
    const defined = await admin({
      operationCode: 'DOCUMENT.PARSE',
      version: 1,
      displayName: 'Parse a document',
      producerPattern: 'document-parser',
      allowedEventTypes: ['STEP_STARTED', 'STEP_PROGRESS', 'STEP_COMPLETED', 'STEP_FAILED'],
      dataSchemas: {
        'document.parse.completed.v2': {
          eventTypes: ['STEP_COMPLETED'],
          jsonSchema: {
            type: 'object',
            required: ['pageCount'],
            properties: { pageCount: { type: 'integer' }, language: { type: 'string' } },
            additionalProperties: false,
          },
        },
      },
    });
    expect(defined.status).toBe(201);
    const wf = await c.createWorkflow({
      tasks: [{ clientTaskKey: 'd', title: 'Doc', knownSteps: [{ ...documentSteps[1], dependsOn: [] }] }],
    });
    const taskId = wf.tasks[0]!.taskId;
    const ctx = await c.activate(taskId, '02_parse');
    await c.report(ctx, c.event(ctx));
    const before = await counts(taskId);
    const video = await c.report(
      ctx,
      c.event(ctx, {
        sourceSeq: 2,
        eventType: 'STEP_COMPLETED',
        data: { schema: 'video.transcode.progress.v1', value: { frame: 1 } },
      }),
    );
    expect(video.status).toBe(422);
    expect(video.body.code).toBe('SCHEMA_NOT_ALLOWED');
    const invalid = await c.report(
      ctx,
      c.event(ctx, {
        sourceSeq: 2,
        eventType: 'STEP_COMPLETED',
        data: { schema: 'document.parse.completed.v2', value: { pageCount: 'many' } },
      }),
    );
    expect(invalid.body.code).toBe('DATA_INVALID');
    const wrongEvent = await c.report(
      ctx,
      c.event(ctx, {
        sourceSeq: 2,
        eventType: 'STEP_PROGRESS',
        data: { schema: 'document.parse.completed.v2', value: { pageCount: 3 } },
      }),
    );
    expect(wrongEvent.body.code).toBe('SCHEMA_NOT_ALLOWED');
    expect(await counts(taskId)).toEqual(before);
    const ok = await c.report(
      ctx,
      c.event(ctx, {
        sourceSeq: 2,
        eventType: 'STEP_COMPLETED',
        data: { schema: 'document.parse.completed.v2', value: { pageCount: 36, language: 'zh-CN' } },
      }),
    );
    expect(ok.status).toBe(200);
    const step = (await c.task(taskId)).execution.steps[0];
    expect(step).toMatchObject({
      dataSchema: 'document.parse.completed.v2',
      data: { pageCount: 36, language: 'zh-CN' },
    });
    // A producer the operation does not allow cannot even be activated for it.
    const wrongProducer = await c.createWorkflow({
      tasks: [
        {
          clientTaskKey: 'e',
          title: 'Doc',
          knownSteps: [{ stepId: 'p', operationCode: 'DOCUMENT.PARSE', expectedProducer: 'video-service' }],
        },
      ],
    });
    const refused = await c.call('POST', `/v1/tasks/${wrongProducer.tasks[0]!.taskId}/steps/p:activate`);
    expect(refused.body.code).toBe('PRODUCER_MISMATCH');
  });

  it('unregistered business statuses are rejected; a business status maps only to its server-defined lifecycle', async () => {
    const define = (version: number, statuses: Record<string, unknown>[]) =>
      h.request('POST', `/admin/v1/applications/${c.app.applicationId}/status-definitions`, {
        token: h.adminToken,
        body: { taskType: 'DOCUMENT_PROCESS', version, statuses },
      });
    expect(
      (
        await define(1, [
          { code: 'PARSING', displayName: 'Parsing', lifecycleStatus: 'RUNNING' },
          {
            code: 'WAITING_REVIEW',
            displayName: 'Waiting for review',
            lifecycleStatus: 'RUNNING',
            severity: 'ACTION_REQUIRED',
          },
          { code: 'COMPLETED', displayName: 'Completed', lifecycleStatus: 'SUCCEEDED', terminal: true },
        ])
      ).status,
    ).toBe(201);
    const wf = await c.createWorkflow({
      tasks: [
        {
          clientTaskKey: 'typed',
          title: 'Typed',
          taskType: 'DOCUMENT_PROCESS',
          statusDefinitionVersion: 1,
          knownSteps: [documentSteps[0]],
        },
      ],
    });
    const taskId = wf.tasks[0]!.taskId;
    const ctx = await c.activate(taskId, '01_prepare');
    expect((await c.report(ctx, c.event(ctx, { businessStatus: 'MADE_UP' }))).body.code).toBe(
      'UNKNOWN_BUSINESS_STATUS',
    );
    // A worker cannot end the task through a terminal business status.
    expect((await c.report(ctx, c.event(ctx, { businessStatus: 'COMPLETED' }))).body.code).toBe(
      'INVALID_TRANSITION',
    );
    const parsing = await c.report(ctx, c.event(ctx, { businessStatus: 'PARSING' }));
    expect(parsing.body).toMatchObject({ businessStatus: 'PARSING', lifecycleStatus: 'RUNNING' });
    // A version 2 with other codes does not change what this task (bound to v1) accepts.
    expect((await define(2, [{ code: 'OCR', displayName: 'OCR', lifecycleStatus: 'RUNNING' }])).status).toBe(
      201,
    );
    expect(
      (await c.report(ctx, c.event(ctx, { sourceSeq: 2, eventType: 'STEP_PROGRESS', businessStatus: 'OCR' })))
        .body.code,
    ).toBe('UNKNOWN_BUSINESS_STATUS');
    const review = await c.report(
      ctx,
      c.event(ctx, { sourceSeq: 2, eventType: 'STEP_PROGRESS', businessStatus: 'WAITING_REVIEW' }),
    );
    expect(review.body.businessStatus).toBe('WAITING_REVIEW');
    // An untyped task accepts no business status at all.
    const { ctx: untyped } = await c.runningContext();
    expect((await c.report(untyped, c.event(untyped, { businessStatus: 'PARSING' }))).body.code).toBe(
      'UNKNOWN_BUSINESS_STATUS',
    );
    // Redefining v1 with other content is refused.
    expect((await define(1, [{ code: 'X', displayName: 'X', lifecycleStatus: 'RUNNING' }])).body.code).toBe(
      'REGISTRY_VERSION_EXISTS',
    );
  });
});

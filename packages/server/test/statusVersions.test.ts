/**
 * Versions, projections and reads of the status service: its correctness rules, continued from
 * status.test.ts.
 */
import { type TaskMessage, TaskStore } from '@tdp/client';
import { newId } from '@tdp/protocol';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Harness, startHarness } from '../../../test/harness.ts';
import { coordinator, documentSteps } from '../../../test/statusFixture.ts';
import { beginStatusTransaction } from '../src/adapters/outbound/postgres/factStore.ts';
import { currentStepsOfTasks } from '../src/adapters/outbound/postgres/transactionReads.ts';
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

const twoProducerTask = async () => {
  const wf = await c.createWorkflow({
    tasks: [
      {
        clientTaskKey: 'pair',
        title: 'Two services',
        knownSteps: [documentSteps[0], { ...documentSteps[1], dependsOn: [] }],
      },
    ],
  });
  const taskId = wf.tasks[0]!.taskId;
  return { wf, taskId, a: await c.activate(taskId, '01_prepare'), b: await c.activate(taskId, '02_parse') };
};

describe('versions', () => {
  it('200 concurrent events from two producers on one task get consecutive task versions with no gap and no repeat', async () => {
    const { taskId, a, b } = await twoProducerTask();
    const start = BigInt((await c.task(taskId)).task.version);
    await Promise.all([c.report(a, c.event(a)), c.report(b, c.event(b))]);
    const sends = [];
    for (let seq = 2; seq <= 101; seq += 1) {
      sends.push(
        c.report(
          a,
          c.event(a, { sourceSeq: seq, eventType: 'STEP_PROGRESS', progress: { percent: seq - 1 } }),
        ),
      );
      sends.push(
        c.report(
          b,
          c.event(b, { sourceSeq: seq, eventType: 'STEP_PROGRESS', progress: { percent: seq - 1 } }),
        ),
      );
    }
    const answers = await Promise.all(sends);
    const refused = answers.filter((r) => r.status !== 200);
    // Concurrent sends of one producer may arrive out of order: those are refused as regressions, never applied twice.
    for (const r of refused) expect(r.body.code).toBe('SOURCE_SEQ_REGRESSION');
    const versions = (
      await sql`SELECT task_version FROM task_event WHERE task_id = ${taskId} AND task_version > ${start} ORDER BY task_version`
    ).map((r) => r.task_version as bigint);
    const expected = Array.from({ length: versions.length }, (_, i) => start + 1n + BigInt(i));
    expect(versions).toEqual(expected);
    expect(versions.length).toBe(2 + answers.length - refused.length);
    const accepted = answers.filter((r) => r.status === 200).map((r) => BigInt(r.body.taskVersion));
    expect(new Set(accepted).size).toBe(accepted.length);
  });

  it('two services reporting strictly in order get task versions 2..201 with no gap', async () => {
    const { taskId, a, b } = await twoProducerTask();
    const base = BigInt((await c.task(taskId)).task.version);
    const stream = async (ctx: typeof a) => {
      const versions: bigint[] = [];
      for (let seq = 1; seq <= 100; seq += 1) {
        const r = await c.report(
          ctx,
          c.event(ctx, { sourceSeq: seq, eventType: seq === 1 ? 'STEP_STARTED' : 'STEP_PROGRESS' }),
        );
        expect(r.status).toBe(200);
        versions.push(BigInt(r.body.taskVersion));
      }
      return versions;
    };
    const [va, vb] = await Promise.all([stream(a), stream(b)]);
    const all = [...va, ...vb].sort((x, y) => (x < y ? -1 : 1));
    expect(all).toEqual(Array.from({ length: 200 }, (_, i) => base + 1n + BigInt(i)));
    // Each producer's own versions rise.
    expect(va).toEqual([...va].sort((x, y) => (x < y ? -1 : 1)));
  });

  it('the current state, the immutable event, the versions, the dedup record and the outbox commit together', async () => {
    const { taskId, a } = await twoProducerTask();
    const body = c.event(a);
    const res = await c.report(a, body);
    const version = BigInt(res.body.taskVersion);
    const [row] = await sql`
      SELECT t.version, s.version AS step_version,
             (SELECT count(*) FROM task_event e WHERE e.id = ${body.eventId} AND e.task_version = t.version) AS events,
             (SELECT count(*) FROM event_dedup d WHERE d.event_id = ${body.eventId}) AS dedup,
             (SELECT count(*) FROM outbox_event o WHERE o.id = ${body.eventId}) AS outbox,
             (SELECT count(*) FROM realtime_message r WHERE r.aggregate_id = t.id AND r.aggregate_version = t.version) AS realtime
      FROM task t JOIN step s ON s.task_id = t.id AND s.step_key = '01_prepare' WHERE t.id = ${taskId}`;
    expect(row).toMatchObject({
      version,
      step_version: BigInt(res.body.stepVersion),
      events: 1n,
      dedup: 1n,
      outbox: 1n,
    });
    expect(Number(row!.realtime)).toBeGreaterThanOrEqual(2);
  });

  it('REST single and batch return the same idempotent result and taskVersion for the same eventId', async () => {
    const { a } = await twoProducerTask();
    const body = c.event(a);
    const single = await c.report(a, body);
    const batch = await h.request('POST', '/v1/task-events:batch', {
      body: { events: [{ ...body, executionToken: a.executionToken }] },
    });
    expect(batch.status).toBe(200);
    expect(batch.body.results[0]).toMatchObject({ ok: true, result: { ...single.body, duplicate: true } });
    // And the other way round: first in a batch, then alone.
    const next = c.event(a, { sourceSeq: 2, eventType: 'STEP_PROGRESS' });
    const viaBatch = await h.request('POST', '/v1/task-events:batch', {
      body: { events: [{ ...next, executionToken: a.executionToken }] },
    });
    const viaSingle = await c.report(a, next);
    expect(viaSingle.body).toEqual({ ...viaBatch.body.results[0].result, duplicate: true });
  });

  it('a batch answers each item on its own: refused items write nothing and do not stop the others', async () => {
    const { taskId, a, b } = await twoProducerTask();
    const events = [
      { ...c.event(a), executionToken: a.executionToken },
      { ...c.event(b, { eventType: 'TASK_COMPLETED' }), executionToken: b.executionToken },
      { executionHandle: b.executionHandle, eventId: newId(), eventType: 'STEP_STARTED', sourceSeq: 1 },
      { ...c.event(a, { sourceSeq: 1, eventType: 'STEP_PROGRESS' }), executionToken: a.executionToken },
      // Handles of a batch are resolved together: one nobody issued is refused on its own.
      {
        executionHandle: `${b.executionHandle}x`,
        eventId: newId(),
        eventType: 'STEP_PROGRESS',
        sourceSeq: 2,
      },
    ];
    const res = await h.request('POST', '/v1/task-events:batch', { token: c.app.apiKey, body: { events } });
    expect(res.body.results.map((r: any) => (r.ok ? 'ok' : r.error.code))).toEqual([
      'ok',
      'EVENT_TYPE_NOT_ALLOWED',
      'ok',
      'SOURCE_SEQ_REGRESSION',
      'EXECUTION_CREDENTIAL_INVALID',
    ]);
    const steps = (await c.task(taskId)).execution.steps;
    expect(steps.map((s: any) => s.status)).toEqual(['RUNNING', 'RUNNING']);
  });

  it('workflowVersion and each taskVersion are independent axes; a task change never rewrites a sibling or the workflow', async () => {
    const wf = await c.createWorkflow({
      tasks: [
        { clientTaskKey: 'a', title: 'A', knownSteps: [documentSteps[0]] },
        { clientTaskKey: 'b', title: 'B', knownSteps: [documentSteps[0]] },
      ],
    });
    const [ta, tb] = wf.tasks;
    const ctx = await c.activate(ta!.taskId, '01_prepare');
    const workflowBefore = (await c.call('GET', `/v1/workflows/${wf.workflowId}`)).body.workflow
      .workflowVersion;
    await c.report(ctx, c.event(ctx));
    await c.report(ctx, c.event(ctx, { sourceSeq: 2, eventType: 'STEP_PROGRESS' }));
    const failed = await c.report(
      ctx,
      c.event(ctx, {
        sourceSeq: 3,
        eventType: 'STEP_FAILED',
        error: { category: 'BUSINESS_INPUT', code: 'UNSUPPORTED', retryable: false },
      }),
    );
    expect(failed.status).toBe(200);
    await c.call('POST', '/v1/task-events', {
      eventId: newId(),
      taskId: ta!.taskId,
      producerId: 'coordinator',
      sourceSeq: 1,
      eventType: 'TASK_FAILED',
      error: {
        category: 'BUSINESS_INPUT',
        code: 'UNSUPPORTED',
        retryable: false,
        userMessage: 'Unsupported file format',
      },
    });
    const view = (await c.call('GET', `/v1/workflows/${wf.workflowId}`)).body;
    const a = view.tasks.find((t: any) => t.taskId === ta!.taskId);
    const b = view.tasks.find((t: any) => t.taskId === tb!.taskId);
    expect(a).toMatchObject({
      lifecycleStatus: 'FAILED',
      error: { code: 'UNSUPPORTED', userMessage: 'Unsupported file format' },
    });
    expect(b).toMatchObject({ lifecycleStatus: 'PENDING', taskVersion: tb!.taskVersion });
    // The workflow moved only when a task's lifecycle moved (PENDING→RUNNING, RUNNING→FAILED): two versions.
    expect(BigInt(view.workflow.workflowVersion)).toBe(BigInt(workflowBefore) + 2n);
    expect(view.workflow.taskCounts).toEqual({ FAILED: 1, PENDING: 1 });
  });

  it("the producer's monotonic duration is kept, never replaced by a wall-clock difference", async () => {
    const { taskId, a } = await twoProducerTask();
    await c.report(a, c.event(a, { occurredAt: '2020-01-01T00:00:00Z' }));
    await c.report(
      a,
      c.event(a, {
        sourceSeq: 2,
        eventType: 'STEP_COMPLETED',
        occurredAt: '2030-01-01T00:00:00Z',
        durationMs: 18_000,
      }),
    );
    const step = (await c.task(taskId)).execution.steps.find((s: any) => s.key === '01_prepare');
    expect(step).toMatchObject({ durationMs: 18_000, durationSource: 'MONOTONIC' });
    const { b } = await twoProducerTask();
    await c.report(b, c.event(b));
    await c.report(
      b,
      c.event(b, {
        sourceSeq: 2,
        eventType: 'STEP_COMPLETED',
        durationMs: 5_000,
        durationSource: 'WALL_CLOCK_ESTIMATE',
      }),
    );
    const steps = (await c.task(b.taskId)).execution.steps;
    expect(steps.find((s: any) => s.key === '02_parse')).toMatchObject({
      durationMs: 5_000,
      durationSource: 'WALL_CLOCK_ESTIMATE',
    });
    const events = (await c.call('GET', `/v1/tasks/${taskId}/events`)).body.items;
    const done = events.find((e: any) => e.eventType === 'STEP_COMPLETED');
    expect(done).toMatchObject({ durationMs: 18_000, occurredAt: '2030-01-01T00:00:00.000Z' });
    expect(done.receivedAt).not.toBe(done.occurredAt);
  });
});

describe('projections and reads', () => {
  it('summary, detail and workflow projections follow their field whitelists; diagnostics never leave the server', async () => {
    const wf = await c.createWorkflow({
      ownerId: 'user-7',
      tasks: [{ clientTaskKey: 'w', title: 'Whitelist', knownSteps: [documentSteps[0]] }],
    });
    const taskId = wf.tasks[0]!.taskId;
    const ctx = await c.activate(taskId, '01_prepare');
    await c.report(ctx, c.event(ctx));
    await c.report(
      ctx,
      c.event(ctx, {
        sourceSeq: 2,
        eventType: 'STEP_FAILED',
        error: {
          category: 'SYSTEM',
          code: 'DISK_FULL',
          retryable: true,
          userMessage: 'Storage is full (token: abc123)',
          diagnosticsRef: 'trace://secret-trace',
        },
      }),
    );
    const rows =
      await sql`SELECT channel, projection, payload FROM realtime_message WHERE aggregate_id = ${taskId} ORDER BY aggregate_version DESC, projection`;
    const detail = rows.find((r) => r.projection === 'TASK_DETAIL')!;
    const summary = rows.find((r) => r.projection === 'USER_SUMMARY')!;
    expect(summary.channel).toBe(`task_user:${c.app.tenantId}/${c.app.applicationId}/user-7`);
    expect(detail.channel).toBe(`task_detail:${c.app.tenantId}/${taskId}`);
    expect(Object.keys(summary.payload).sort()).toEqual(
      [
        'kind',
        'schemaVersion',
        'taskId',
        'workflowId',
        'taskVersion',
        'title',
        'taskType',
        'productId',
        'lifecycleStatus',
        'businessStatus',
        'health',
        'progressPercent',
        'error',
        'createdAt',
        'updatedAt',
        'startedAt',
        'finishedAt',
        'notice',
      ].sort(),
    );
    expect(detail.payload.state.steps[0]).toMatchObject({
      stepId: '01_prepare',
      error: { code: 'DISK_FULL', userMessage: 'Storage is full ([redacted])' },
    });
    const everything = JSON.stringify(
      await sql`SELECT payload FROM realtime_message WHERE aggregate_id = ${taskId}`,
    );
    expect(everything).not.toContain('secret-trace');
    expect(everything).not.toContain('abc123');
    expect(JSON.stringify((await c.call('GET', `/v1/tasks/${taskId}/events`)).body)).not.toContain(
      'secret-trace',
    );
    expect(JSON.stringify(await c.task(taskId))).not.toContain('secret-trace');
    // The log keeps it for the server's own diagnostics.
    const [logged] =
      await sql`SELECT payload FROM task_event WHERE task_id = ${taskId} AND type = 'STEP_FAILED'`;
    expect(logged!.payload.error.diagnosticsRef).toBe('trace://secret-trace');
  });

  it('a user not watching the detail still gets failure and action-required notices on the summary channel (notice id taskId:taskVersion)', async () => {
    const wf = await c.createWorkflow({
      ownerId: 'user-notice',
      tasks: [{ clientTaskKey: 'n', title: 'Notices', knownSteps: [documentSteps[0]] }],
    });
    const taskId = wf.tasks[0]!.taskId;
    const ctx = await c.activate(taskId, '01_prepare');
    await c.report(ctx, c.event(ctx));
    const failed = await c.report(
      ctx,
      c.event(ctx, {
        sourceSeq: 2,
        eventType: 'STEP_FAILED',
        error: { category: 'X', code: 'Y', retryable: false, userMessage: 'Could not read page 3' },
      }),
    );
    const [row] =
      await sql`SELECT payload FROM realtime_message WHERE aggregate_id = ${taskId} AND projection = 'USER_SUMMARY' AND aggregate_version = ${BigInt(failed.body.taskVersion)}`;
    expect(row!.payload.notice).toEqual({
      id: `${taskId}:${failed.body.taskVersion}`,
      kind: 'STEP_FAILED',
      severity: 'ERROR',
      message: 'Could not read page 3',
    });
    // Progress rows carry no notice; every failure and terminal row carries its own.
    const notices =
      await sql`SELECT payload->'notice'->>'kind' AS kind FROM realtime_message WHERE aggregate_id = ${taskId} AND projection = 'USER_SUMMARY' ORDER BY aggregate_version`;
    expect(notices.map((n) => n.kind)).toEqual([null, null, null, 'STEP_FAILED']);
  });

  it('one user summary channel interleaves several tasks, each with its own task version; summaries carry no inputs or step data', async () => {
    const wf = await c.createWorkflow({
      ownerId: 'user-multi',
      tasks: [1, 2, 3].map((i) => ({
        clientTaskKey: `t${i}`,
        title: `Task ${i}`,
        knownSteps: [documentSteps[0]],
      })),
    });
    for (const t of wf.tasks) {
      const ctx = await c.activate(t.taskId, '01_prepare');
      await c.report(ctx, c.event(ctx));
    }
    const rows =
      await sql`SELECT aggregate_id, aggregate_version, payload FROM realtime_message WHERE channel = ${`task_user:${c.app.tenantId}/${c.app.applicationId}/user-multi`} ORDER BY created_at, id`;
    const perTask = new Map<string, bigint[]>();
    for (const r of rows)
      perTask.set(r.aggregate_id, [...(perTask.get(r.aggregate_id) ?? []), r.aggregate_version]);
    expect(perTask.size).toBe(3);
    for (const versions of perTask.values()) expect(versions).toEqual([1n, 2n, 3n]);
    for (const r of rows) {
      expect(r.payload.taskVersion).toBe(r.aggregate_version.toString());
      expect(r.payload).not.toHaveProperty('steps');
      expect(r.payload).not.toHaveProperty('input');
      expect(r.payload).toHaveProperty('lifecycleStatus');
    }
  });

  it('the timeline resumes from afterTaskVersion and recognises a pruned window', async () => {
    const { taskId, a } = await twoProducerTask();
    for (let seq = 1; seq <= 5; seq += 1)
      await c.report(
        a,
        c.event(a, { sourceSeq: seq, eventType: seq === 1 ? 'STEP_STARTED' : 'STEP_PROGRESS' }),
      );
    const all = (await c.call('GET', `/v1/tasks/${taskId}/events?limit=3`)).body;
    expect(all.items.map((e: any) => e.taskVersion)).toEqual(['1', '2', '3']);
    const rest = (
      await c.call('GET', `/v1/tasks/${taskId}/events?afterTaskVersion=${all.nextAfterTaskVersion}`)
    ).body;
    expect(rest.items.map((e: any) => e.taskVersion)).toEqual(['4', '5', '6', '7', '8']);
    expect(rest.nextAfterTaskVersion).toBeNull();
    const { PostgresStatusReads } = await import('../src/adapters/outbound/postgres/statusReads.ts');
    await new PostgresStatusReads(sql as never).pruneEvents(taskId, 5n);
    const pruned = await c.call('GET', `/v1/tasks/${taskId}/events?afterTaskVersion=2`);
    expect(pruned.status).toBe(410);
    expect(pruned.body.code).toBe('EVENTS_PRUNED');
    const fromEdge = (await c.call('GET', `/v1/tasks/${taskId}/events?afterTaskVersion=4`)).body;
    expect(fromEdge.items[0].taskVersion).toBe('5');
    expect(fromEdge.oldestAvailableTaskVersion).toBe('5');
  });

  it('batchGet returns full snapshots only for tasks that changed since the known version', async () => {
    const { taskId, a } = await twoProducerTask();
    const { taskId: quiet } = await twoProducerTask();
    const known = (await c.task(taskId)).task.version;
    const quietVersion = (await c.task(quiet)).task.version;
    await c.report(a, c.event(a));
    const res = await c.call('POST', '/v1/tasks/status:batchGet', {
      tasks: [
        { taskId, knownVersion: known },
        { taskId: quiet, knownVersion: quietVersion },
        { taskId: newId() },
      ],
    });
    expect(res.body.items[0]).toMatchObject({
      found: true,
      changed: true,
      snapshot: { task: { id: taskId } },
    });
    expect(res.body.items[1]).toEqual({
      taskId: quiet,
      found: true,
      changed: false,
      taskVersion: quietVersion,
    });
    expect(res.body.items[2]).toMatchObject({ found: false });
  });

  it('a user reads their own and shared tasks; ACL revocation publishes a removal and blocks further reads', async () => {
    const wf = await c.createWorkflow({
      ownerId: 'alice',
      tasks: [
        { clientTaskKey: 'mine', title: 'Mine' },
        { clientTaskKey: 'shared', title: 'Shared' },
      ],
    });
    const [mine, shared] = wf.tasks;
    const token = async (userId: string, projects: string[] = []) =>
      (await c.call('POST', '/v1/user-tokens', { userId, projects })).body.token as string;
    const alice = await token('alice');
    const bob = await token('bob', ['finance']);
    const list = async (t: string) =>
      (await h.request('GET', '/v1/me/tasks', { token: t })).body.items.map((i: any) => i.taskId);
    expect((await list(alice)).sort()).toEqual([mine!.taskId, shared!.taskId].sort());
    expect(await list(bob)).toEqual([]);
    expect((await h.request('GET', `/v1/tasks/${shared!.taskId}/events`, { token: bob })).status).toBe(404);

    expect(
      (
        await c.call('POST', `/v1/tasks/${shared!.taskId}/acl`, {
          principalType: 'PROJECT',
          principalId: 'finance',
        })
      ).status,
    ).toBe(204);
    expect(await list(bob)).toEqual([shared!.taskId]);
    expect((await h.request('GET', `/v1/tasks/${shared!.taskId}/events`, { token: bob })).status).toBe(200);
    const view = (await h.request('GET', `/v1/workflows/${wf.workflowId}`, { token: bob })).body;
    expect(view.tasks.map((t: any) => t.taskId)).toEqual([shared!.taskId]);

    expect((await c.call('DELETE', `/v1/tasks/${shared!.taskId}/acl/PROJECT/finance`)).status).toBe(204);
    expect(await list(bob)).toEqual([]);
    expect((await h.request('GET', `/v1/tasks/${shared!.taskId}/events`, { token: bob })).status).toBe(404);
    const [removal] =
      await sql`SELECT channel, payload FROM realtime_message WHERE aggregate_id = ${shared!.taskId} AND projection = 'USER_REMOVAL'`;
    expect(removal).toMatchObject({
      channel: `task_project:${c.app.tenantId}/${c.app.applicationId}/finance`,
      payload: { kind: 'task.removed', taskId: shared!.taskId },
    });
    expect((await h.request('GET', '/v1/me/tasks', { token: c.app.apiKey })).status).toBe(401);
  });

  it('revoke then re-grant at the same task version: a client store shows the task again', async () => {
    const wf = await c.createWorkflow({
      ownerId: 'alice',
      tasks: [{ clientTaskKey: 'lent', title: 'Lent' }],
    });
    const taskId = wf.tasks[0]!.taskId;
    const acl = `/v1/tasks/${taskId}/acl`;
    const grant = { principalType: 'USER', principalId: 'carol' };
    expect((await c.call('POST', acl, grant)).status).toBe(204);
    expect((await c.call('DELETE', `${acl}/USER/carol`)).status).toBe(204);
    expect((await c.call('POST', acl, grant)).status).toBe(204);
    // What carol's channel carries, in commit order, through the store a page keeps.
    const messages = await sql<{ payload: TaskMessage }[]>`
      SELECT payload FROM realtime_message
      WHERE aggregate_id = ${taskId} AND channel LIKE '%/carol' ORDER BY created_at, outbox_id, position`;
    expect(messages.map((m) => m.payload.kind)).toEqual(['task.summary', 'task.removed', 'task.summary']);
    expect(new Set(messages.map((m) => m.payload.taskVersion)).size).toBe(1);
    const store = new TaskStore();
    store.endSnapshot([]);
    store.receive(messages[0]!.payload);
    store.receive(messages[1]!.payload);
    expect(store.summary(taskId)).toBeNull();
    store.receive(messages[2]!.payload);
    expect(store.summary(taskId)?.taskId).toBe(taskId);
    store.receive(messages[0]!.payload); // the first grant again (a redelivery): changes nothing
    expect(store.summary(taskId)?.taskId).toBe(taskId);
  });

  it('classification binds the type once, guarded by If-Match on the task version', async () => {
    await h.request('POST', `/admin/v1/applications/${c.app.applicationId}/status-definitions`, {
      token: h.adminToken,
      body: {
        taskType: 'RESEARCH',
        version: 1,
        statuses: [{ code: 'SEARCHING', displayName: 'Searching', lifecycleStatus: 'RUNNING' }],
      },
    });
    const wf = await c.createWorkflow({ tasks: [{ clientTaskKey: 'c', title: 'Unclassified' }] });
    const taskId = wf.tasks[0]!.taskId;
    const patch = (body: unknown, ifMatch?: string) =>
      c.call(
        'PATCH',
        `/v1/tasks/${taskId}/classification`,
        body,
        ifMatch ? { 'if-match': ifMatch } : undefined,
      );
    expect((await patch({ productId: 'kb' })).body.code).toBe('PRECONDITION_REQUIRED');
    expect((await patch({ productId: 'kb' }, '"7"')).body.code).toBe('VERSION_MISMATCH');
    const classified = await patch(
      { productId: 'knowledge-assistant', taskType: 'RESEARCH', statusDefinitionVersion: 1 },
      '"1"',
    );
    expect(classified.status).toBe(200);
    expect(classified.headers.get('etag')).toBe('"2"');
    expect(classified.body.task).toMatchObject({
      taskType: 'RESEARCH',
      statusDefinitionVersion: 1,
      productId: 'knowledge-assistant',
      version: '2',
    });
    expect((await patch({ taskType: 'OTHER' }, '"2"')).body.code).toBe('TASK_TYPE_FROZEN');
    expect((await patch({ productId: 'renamed' }, '"2"')).body.task.productId).toBe('renamed');
    const events = (await c.call('GET', `/v1/tasks/${taskId}/events`)).body.items.map(
      (e: any) => e.eventType,
    );
    expect(events).toEqual(['TASK_CREATED', 'TASK_CLASSIFIED', 'TASK_CLASSIFIED']);
  });

  it('maps an external reference to exactly one task', async () => {
    const { taskId } = await twoProducerTask();
    const { taskId: other } = await twoProducerTask();
    expect((await c.call('PUT', `/v1/tasks/${taskId}/external-refs/ORDER_ID/order-88`)).status).toBe(204);
    expect((await c.call('PUT', `/v1/tasks/${taskId}/external-refs/ORDER_ID/order-88`)).status).toBe(204);
    expect((await c.call('PUT', `/v1/tasks/${other}/external-refs/ORDER_ID/order-88`)).status).toBe(409);
    expect((await c.call('GET', '/v1/external-refs/ORDER_ID/order-88')).body).toEqual({ taskId });
  });
});

/*
 * PostgreSQL updates a row in place (HOT: no new index entries, no dead index tuples) only when no
 * indexed column changes. A task's hot rows (task, execution, step) are rewritten by every event, so
 * none of the columns an ordinary progress report changes may be part of an index, as key or predicate.
 */
/** Columns of `table` used by any of its indexes, in keys, expressions or predicates. */
async function indexedColumns(table: string): Promise<Set<string>> {
  const rows = await sql<{ name: string }[]>`
    SELECT DISTINCT a.attname AS name
    FROM pg_index i
    JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum > 0 AND NOT a.attisdropped
    WHERE i.indrelid = ${table}::regclass
      AND (a.attnum = ANY(i.indkey)
        OR pg_get_expr(i.indpred, i.indrelid) ~ ('\\m' || a.attname || '\\M')
        OR pg_get_expr(i.indexprs, i.indrelid) ~ ('\\m' || a.attname || '\\M'))`;
  return new Set(rows.map((r) => r.name));
}

/** The columns whose values differ between two versions of a row. */
function changed(before: Record<string, unknown>, after: Record<string, unknown>): string[] {
  const text = (v: unknown) => JSON.stringify(v, (_, x) => (typeof x === 'bigint' ? x.toString() : x));
  return Object.keys(after).filter((k) => text(before[k]) !== text(after[k]));
}

describe('updates in place', () => {
  it('a progress report changes no indexed column of the task, execution or step row', async () => {
    const wf = await c.createWorkflow({
      tasks: [
        {
          clientTaskKey: 'watched',
          title: 'A step with a heartbeat timeout',
          knownSteps: [
            {
              stepId: 'work',
              operationCode: 'WORK.DO',
              expectedProducer: 'worker-service',
              heartbeatTimeoutSeconds: 60,
            },
          ],
        },
      ],
    });
    const taskId = wf.tasks[0]!.taskId;
    const ctx = await c.activate(taskId, 'work');
    expect((await c.report(ctx, c.event(ctx))).status).toBe(200);

    const rows = async () => ({
      task: (await sql`SELECT * FROM task WHERE id = ${taskId}`)[0]!,
      execution: (
        await sql`SELECT e.* FROM execution e JOIN task t ON e.id = t.current_execution_id WHERE t.id = ${taskId}`
      )[0]!,
      step: (await sql`SELECT * FROM step WHERE task_id = ${taskId}`)[0]!,
      execution_lease: (await sql`SELECT * FROM execution_lease WHERE task_id = ${taskId}`)[0]!,
    });
    const before = await rows();
    // Later, so that time-derived columns (the heartbeat deadline among them) move as they would.
    h.clock.advance(5_000);
    const progress = c.event(ctx, { sourceSeq: 2, eventType: 'STEP_PROGRESS', progress: { percent: 40 } });
    expect((await c.report(ctx, progress)).status).toBe(200);
    const after = await rows();

    for (const table of ['task', 'execution', 'step', 'execution_lease'] as const) {
      const moved = changed(before[table], after[table]);
      // The report did rewrite the row (so the check below is not vacuous)…
      expect({ table, rewritten: moved.length > 0 }).toEqual({ table, rewritten: true });
      // …and nothing it rewrote is indexed.
      const indexed = await indexedColumns(table);
      expect({ table, indexed: moved.filter((name) => indexed.has(name)) }).toEqual({ table, indexed: [] });
    }
    expect(changed(before.step, after.step)).toEqual(
      expect.arrayContaining(['version', 'heartbeat_deadline_at']),
    );
  });
});

describe('plans that do not wait for statistics', () => {
  it('a status transaction plans a key read once (generic), as an index scan even on a table with no statistics', async () => {
    const reserved = await sql.reserve();
    try {
      await reserved.unsafe(beginStatusTransaction);
      // New and never analysed, as every table is on a new database.
      await reserved.unsafe('CREATE TEMP TABLE fresh_task (LIKE task INCLUDING INDEXES) ON COMMIT DROP');
      await reserved.unsafe(
        'PREPARE fresh_lock (uuid[]) AS SELECT * FROM fresh_task WHERE id = ANY($1) ORDER BY id FOR UPDATE',
      );
      const [row] = await reserved.unsafe(`EXPLAIN (FORMAT JSON) EXECUTE fresh_lock('{${newId()}}')`);
      await reserved.unsafe('DEALLOCATE fresh_lock');
      const plan = JSON.stringify(row!['QUERY PLAN']);
      // A generic plan keeps the parameter; a custom one would show the value.
      expect(plan).toContain('id = ANY ($1)');
      expect(plan).not.toContain('Seq Scan');
    } finally {
      await reserved.unsafe('ROLLBACK');
      reserved.release();
    }
  });

  it("a batch's step read uses step's indexes on a new database and after ANALYZE", async () => {
    const wf = await c.createWorkflow({
      tasks: [{ clientTaskKey: 'planned', title: 'One of many', knownSteps: [documentSteps[0]] }],
    });
    const taskId = wf.tasks[0]!.taskId;
    // Thousands of finished steps of other tasks, as a database holds after its first minute.
    await sql`
      INSERT INTO step
      SELECT (jsonb_populate_record(s, jsonb_build_object(
        'id', gen_random_uuid(), 'task_id', gen_random_uuid(), 'execution_id', gen_random_uuid(),
        'attempt_id', NULL, 'status', 'SUCCEEDED'))).*
      FROM step s, generate_series(1, 5000)
      WHERE s.task_id = ${taskId}`;
    const scansOfStep = async () => {
      // The plan a connection settles on after its first executions: the generic one, made without the
      // parameter's value.
      const plan = await sql.begin(async (tx) => {
        await tx`SET LOCAL plan_cache_mode = force_generic_plan`;
        await tx.unsafe(`PREPARE steps_of_tasks (uuid[]) AS ${currentStepsOfTasks}`);
        const [row] = await tx.unsafe(`EXPLAIN (FORMAT JSON) EXECUTE steps_of_tasks('{${taskId}}')`);
        await tx.unsafe('DEALLOCATE steps_of_tasks');
        return JSON.stringify(row!['QUERY PLAN']);
      });
      return [...plan.matchAll(/"Node Type":"Seq Scan"[^}]*?"Relation Name":"(\w+)"/g)].map((m) => m[1]);
    };
    try {
      expect(await scansOfStep()).not.toContain('step');
      await sql`ANALYZE step`;
      await sql`ANALYZE task`;
      expect(await scansOfStep()).not.toContain('step');
    } finally {
      // The copies belong to no task (the harness checks references when it drops the database).
      await sql`DELETE FROM step WHERE task_id NOT IN (SELECT id FROM task)`;
    }
  });
});

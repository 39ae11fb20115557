/**
 * The administrator's correction (`POST /admin/v1/tasks/{id}:correct`, docs/operators.md): a new task
 * version and an immutable ADMIN_CORRECTED event with old and new values, reason and operator, seen live
 * on the task's summary and detail channels, in its timeline and in the operator audit; a correction the
 * state machine forbids is 409 without `force` (nothing changed) and made, audited, with it; bad input
 * changes nothing.
 */
import { newId } from '@tdp/protocol';
import type { Centrifuge } from 'centrifuge';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { followTaskDetail } from '../../../test/followDetail.ts';
import { type Harness, startHarness, zipWorkflow } from '../../../test/harness.ts';
import { connectDatabase } from '../src/main.ts';

let h: Harness;
let sql: ReturnType<typeof connectDatabase>;
let app: Awaited<ReturnType<Harness['createApplication']>>;
const clients: Centrifuge[] = [];
const owner = 'correction-owner';

beforeAll(async () => {
  h = await startHarness({ runLoops: true });
  sql = connectDatabase({ url: h.databaseUrl, maxConnections: 2 });
  app = await h.createApplication();
  await h.request('POST', '/v1/workflow-definitions', { token: app.apiKey, body: zipWorkflow() });
});
afterAll(async () => {
  for (const client of clients) client.disconnect();
  await sql.end();
  await h.close();
});

// No worker offers the steps: the task stays PENDING (its execution CREATED) until it is changed.
async function submit(): Promise<string> {
  const created = await h.request('POST', '/v1/tasks', {
    token: app.apiKey,
    headers: { 'idempotency-key': newId() },
    body: {
      workflowName: 'zip-clean-watermark',
      workflowVersion: '1',
      name: 'to correct',
      input: { sourceZip: 'asset://z' },
      ownerId: owner,
    },
  });
  expect(created.status).toBe(201);
  return created.body.task.id;
}

const correct = (taskId: string, body: unknown, token = h.adminToken) =>
  h.request('POST', `/admin/v1/tasks/${taskId}:correct`, { token, body });
const read = async (taskId: string) =>
  (await h.request('GET', `/v1/tasks/${taskId}`, { token: app.apiKey })).body;
const audits = (taskId: string) =>
  sql`SELECT action, actor, reason, details FROM operator_audit WHERE subject_id = ${taskId} ORDER BY created_at, id`;
const events = (taskId: string) =>
  sql<{ type: string; producer: string; payload: any; task_version: bigint }[]>`
    SELECT type, producer, payload, task_version FROM task_event WHERE task_id = ${taskId} ORDER BY task_version`;

describe('a correction', () => {
  it('writes a new version and an ADMIN_CORRECTED event, seen live on the summary and detail channels, with its audit', async () => {
    const taskId = await submit();
    const details = await followTaskDetail(h, app.apiKey, owner, taskId, clients);
    const summaries: any[] = [];
    clients.at(-1)!.on('publication', (ctx) => summaries.push(ctx.data));
    const before = await read(taskId);
    expect([before.task.lifecycleStatus, before.execution.status]).toEqual(['PENDING', 'CREATED']);

    const answer = await correct(taskId, {
      lifecycleStatus: 'SUCCEEDED',
      businessStatus: 'DONE_BY_HAND',
      reason: 'the worker ran it outside TDP',
    });
    expect(answer.status).toBe(200);
    expect(answer.body.forced).toBe(false);
    const version = String(BigInt(before.task.version) + 1n);
    expect(answer.body.task.task).toMatchObject({
      lifecycleStatus: 'SUCCEEDED',
      businessStatus: 'DONE_BY_HAND',
      version,
    });
    const after = await read(taskId);
    expect([after.task.lifecycleStatus, after.execution.status, after.task.version]).toEqual([
      'SUCCEEDED',
      'SUCCEEDED',
      version,
    ]);

    const change = {
      old: {
        lifecycleStatus: 'PENDING',
        executionStatus: 'CREATED',
        businessStatus: before.task.businessStatus,
      },
      new: { lifecycleStatus: 'SUCCEEDED', executionStatus: 'SUCCEEDED', businessStatus: 'DONE_BY_HAND' },
      forced: false,
    };
    const last = (await events(taskId)).at(-1)!;
    expect(last).toMatchObject({
      type: 'ADMIN_CORRECTED',
      producer: 'operator:bootstrap admin token',
      task_version: BigInt(version),
      payload: {
        ...change,
        reason: 'the worker ran it outside TDP',
        operator: { id: null, name: 'bootstrap admin token' },
      },
    });
    expect(await audits(taskId)).toEqual([
      {
        action: 'TASK_CORRECTED',
        actor: 'bootstrap admin token',
        reason: 'the worker ran it outside TDP',
        details: { ...change, taskVersion: version, eventId: answer.body.eventId },
      },
    ]);

    // Live: the detail channel gets the corrected state with the event that made it.
    await expect
      .poll(() => details.find((d) => d.triggerEvent?.eventType === 'ADMIN_CORRECTED'), { timeout: 10_000 })
      .toBeDefined();
    const live = details.find((d) => d.triggerEvent.eventType === 'ADMIN_CORRECTED');
    expect(live.state).toMatchObject({ lifecycleStatus: 'SUCCEEDED', businessStatus: 'DONE_BY_HAND' });
    // … and the owner's summary channel.
    await expect
      .poll(() => summaries.filter((s) => s.taskId === taskId).at(-1)?.lifecycleStatus, { timeout: 10_000 })
      .toBe('SUCCEEDED');
    const timeline = (await h.request('GET', `/v1/tasks/${taskId}/timeline`, { token: app.apiKey })).body
      .items;
    expect(timeline.find((m: any) => m.kind === 'ADMIN_CORRECTED')).toMatchObject({
      message: expect.stringContaining('the worker ran it outside TDP'),
    });
  });

  it('corrects a step of the current execution', async () => {
    const taskId = await submit();
    const answer = await correct(taskId, {
      stepKey: 'clean',
      lifecycleStatus: 'SUCCEEDED',
      reason: 'cleaned by hand',
    });
    expect(answer.status).toBe(200);
    const step = (await read(taskId)).execution.steps.find((s: any) => s.key === 'clean');
    expect(step.status).toBe('SUCCEEDED');
    expect((await events(taskId)).at(-1)).toMatchObject({
      type: 'ADMIN_CORRECTED',
      payload: {
        stepKey: 'clean',
        old: { status: expect.stringMatching(/READY|QUEUED/) },
        new: { status: 'SUCCEEDED' },
      },
    });
  });

  it('refuses a transition the state machine forbids (409, nothing changed), and makes it with force, audited', async () => {
    const taskId = await submit();
    expect((await h.request('POST', `/v1/tasks/${taskId}:cancel`, { token: app.apiKey })).status).toBe(200);
    const before = await read(taskId);
    expect(before.task.lifecycleStatus).toBe('CANCELLED');
    const eventsBefore = (await events(taskId)).length;

    for (const body of [
      { lifecycleStatus: 'RUNNING', reason: 'bring it back' },
      { lifecycleStatus: 'SUCCEEDED', reason: 'it did finish' },
      { stepKey: 'clean', lifecycleStatus: 'RUNNING', reason: 'step back' },
    ]) {
      const refused = await correct(taskId, body);
      expect([refused.status, refused.body.code]).toEqual([409, 'CORRECTION_FORBIDDEN']);
      expect(refused.headers.get('content-type')).toContain('application/problem+json');
    }
    expect((await read(taskId)).task.version).toBe(before.task.version);
    expect((await events(taskId)).length).toBe(eventsBefore);
    expect(await audits(taskId)).toEqual([]);

    const forced = await correct(taskId, {
      lifecycleStatus: 'SUCCEEDED',
      reason: 'it did finish',
      force: true,
    });
    expect(forced.status).toBe(200);
    expect(forced.body.forced).toBe(true);
    const after = await read(taskId);
    expect([after.task.lifecycleStatus, after.execution.status]).toEqual(['SUCCEEDED', 'SUCCEEDED']);
    expect(await audits(taskId)).toMatchObject([
      {
        action: 'TASK_CORRECTED',
        reason: 'it did finish',
        details: {
          forced: true,
          old: { lifecycleStatus: 'CANCELLED' },
          new: { lifecycleStatus: 'SUCCEEDED' },
        },
      },
    ]);
  });

  it("takes only a business status the task's status definition registers, forced or not", async () => {
    const defined = await h.request(
      'POST',
      `/admin/v1/applications/${app.applicationId}/status-definitions`,
      {
        token: h.adminToken,
        body: {
          taskType: 'ZIP',
          version: 1,
          statuses: [{ code: 'FIXED_BY_HAND', displayName: 'Fixed by hand', lifecycleStatus: 'SUCCEEDED' }],
        },
      },
    );
    expect(defined.status).toBe(201);
    const taskId = await submit();
    const classified = await h.request('PATCH', `/v1/tasks/${taskId}/classification`, {
      token: app.apiKey,
      headers: { 'if-match': `"${(await read(taskId)).task.version}"` },
      body: { taskType: 'ZIP', statusDefinitionVersion: 1 },
    });
    expect(classified.status).toBe(200);
    const before = await read(taskId);
    for (const force of [false, true]) {
      const refused = await correct(taskId, {
        lifecycleStatus: 'SUCCEEDED',
        businessStatus: 'MADE_UP',
        reason: 'r',
        force,
      });
      expect([refused.status, refused.body.code]).toEqual([422, 'UNKNOWN_BUSINESS_STATUS']);
    }
    expect((await read(taskId)).task.version).toBe(before.task.version);
    expect(await audits(taskId)).toEqual([]);
    const fixed = await correct(taskId, {
      lifecycleStatus: 'SUCCEEDED',
      businessStatus: 'FIXED_BY_HAND',
      reason: 'r',
    });
    expect(fixed.status).toBe(200);
    expect((await read(taskId)).task.businessStatus).toBe('FIXED_BY_HAND');
  });

  it('refuses bad input with a problem and changes nothing', async () => {
    const taskId = await submit();
    const before = await read(taskId);
    const good = { lifecycleStatus: 'RUNNING', reason: 'r' };
    const cases: [string, () => ReturnType<Harness['request']>, number, string][] = [
      ['no reason', () => correct(taskId, { lifecycleStatus: 'RUNNING' }), 400, 'VALIDATION_FAILED'],
      ['an empty reason', () => correct(taskId, { ...good, reason: '' }), 400, 'VALIDATION_FAILED'],
      ['no status', () => correct(taskId, { reason: 'r' }), 400, 'VALIDATION_FAILED'],
      [
        'an unknown status',
        () => correct(taskId, { ...good, lifecycleStatus: 'DONE' }),
        400,
        'VALIDATION_FAILED',
      ],
      ['force not a boolean', () => correct(taskId, { ...good, force: 'yes' }), 400, 'VALIDATION_FAILED'],
      ['an unknown field', () => correct(taskId, { ...good, version: 3 }), 400, 'VALIDATION_FAILED'],
      [
        'a change to what it is already',
        () => correct(taskId, { lifecycleStatus: 'PENDING', reason: 'r' }),
        400,
        'VALIDATION_FAILED',
      ],
      [
        'a step TIMED_OUT',
        () => correct(taskId, { stepKey: 'clean', lifecycleStatus: 'TIMED_OUT', reason: 'r' }),
        400,
        'VALIDATION_FAILED',
      ],
      ['an unknown step', () => correct(taskId, { ...good, stepKey: 'nope' }), 404, 'STEP_NOT_REGISTERED'],
      ['an unknown task', () => correct(newId(), good), 404, 'TASK_NOT_FOUND'],
      ['an application key', () => correct(taskId, good, app.apiKey), 401, 'UNAUTHENTICATED'],
    ];
    for (const [name, send, status, code] of cases) {
      const answer = await send();
      expect([name, answer.status, answer.body.code]).toEqual([name, status, code]);
      expect(answer.headers.get('content-type')).toContain('application/problem+json');
    }
    const after = await read(taskId);
    expect([after.task.version, after.task.lifecycleStatus]).toEqual([before.task.version, 'PENDING']);
    expect(await audits(taskId)).toEqual([]);
  });
});

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Harness, startHarness, zipWorkflow } from '../../../test/harness.ts';
import { connectDatabase } from '../src/main.ts';

let h: Harness;
let app: Awaited<ReturnType<Harness['createApplication']>>;
let sql: ReturnType<typeof connectDatabase>;

const taskBody = (overrides: Record<string, unknown> = {}) => ({
  workflowName: 'zip-clean-watermark',
  workflowVersion: '1',
  name: 'Holiday photos',
  externalRef: 'order-1',
  input: { sourceZip: 'asset://a1', watermarkText: '© ACME' },
  callbackUrl: 'https://app.example/tdp/callback',
  priority: 70,
  ownerId: 'user-7',
  ...overrides,
});

async function counts() {
  const [row] = await sql`
    SELECT (SELECT count(*) FROM task) AS tasks, (SELECT count(*) FROM execution) AS executions,
           (SELECT count(*) FROM step) AS steps, (SELECT count(*) FROM task_event) AS events,
           (SELECT count(*) FROM outbox_event) AS outbox, (SELECT count(*) FROM idempotency) AS idempotency`;
  return row;
}

beforeAll(async () => {
  h = await startHarness();
  sql = connectDatabase({ url: h.databaseUrl, maxConnections: 2 });
  app = await h.createApplication();
  const published = await h.request('POST', '/v1/workflow-definitions', {
    token: app.apiKey,
    body: zipWorkflow(),
  });
  expect(published.status).toBe(201);
});

afterAll(async () => {
  await sql.end();
  await h.close();
});

describe('POST /v1/tasks', () => {
  it('creates the task, execution #1 with its frozen snapshot, steps, first event and outbox row together', async () => {
    const res = await h.request('POST', '/v1/tasks', {
      token: app.apiKey,
      headers: { 'idempotency-key': 'create-1' },
      body: taskBody({
        stepConstraints: {
          watermark: { requiredLabels: { gpu: 'true' }, minimumResources: { memoryMb: 512 } },
        },
      }),
    });
    expect(res.status).toBe(201);
    expect(res.headers.get('location')).toBe(`/v1/tasks/${res.body.task.id}`);
    expect(res.body.task).toMatchObject({
      name: 'Holiday photos',
      externalRef: 'order-1',
      lifecycleStatus: 'PENDING',
      version: '1',
      priority: 70,
      ownerId: 'user-7',
      applicationId: app.applicationId,
    });
    expect(res.body.execution).toMatchObject({ number: 1, status: 'CREATED', progress: 0 });
    // The platform coordinates: the root step is ready (with a scheduling request), its dependent waits.
    expect(
      res.body.execution.steps.map((s: { key: string; status: string }) => `${s.key}:${s.status}`),
    ).toEqual(['clean:READY', 'watermark:WAITING']);
    const requests =
      await sql`SELECT r.status, s.step_key FROM scheduling_request r JOIN step s ON s.id = r.step_id WHERE r.task_id = ${res.body.task.id}`;
    expect(requests).toEqual([{ status: 'PENDING', step_key: 'clean' }]);
    const [callback] =
      await sql`SELECT sequence, event_type, url, payload FROM callback_delivery WHERE task_id = ${res.body.task.id}`;
    expect(callback).toMatchObject({
      sequence: 1,
      event_type: 'execution.created',
      url: 'https://app.example/tdp/callback',
    });
    expect(callback!.payload).toMatchObject({
      specVersion: '1.1',
      type: 'execution.created',
      sequence: 1,
      externalRef: 'order-1',
      status: 'CREATED',
    });

    const [execution] = await sql`SELECT snapshot FROM execution WHERE id = ${res.body.execution.id}`;
    expect(execution!.snapshot.steps[1].affinity).toEqual({
      requiredLabels: { gpu: 'true' },
      minimumResources: { memoryMb: 512 },
    });
    expect(execution!.snapshot.steps[0].affinity).toEqual({});
    const events = await sql`SELECT task_version, type FROM task_event WHERE task_id = ${res.body.task.id}`;
    expect(events.map((e) => [e.task_version, e.type])).toEqual([[1n, 'TASK_CREATED']]);
    const outbox =
      await sql`SELECT id, event_type, status, payload FROM outbox_event WHERE aggregate_id = ${res.body.task.id}`;
    expect(outbox).toHaveLength(1);
    expect(outbox[0]).toMatchObject({ event_type: 'TASK_CREATED', status: 'PENDING' });
    expect(outbox[0]!.payload).toMatchObject({
      taskId: res.body.task.id,
      executionId: res.body.execution.id,
      taskVersion: '1',
    });
  });

  it('replays the original answer for the same key and request, and refuses the key for another request', async () => {
    const first = await h.request('POST', '/v1/tasks', {
      token: app.apiKey,
      headers: { 'idempotency-key': 'replay-1' },
      body: taskBody(),
    });
    const before = await counts();
    // Same meaning, different key order: still the same request.
    const { input, ...rest } = taskBody();
    const again = await h.request('POST', '/v1/tasks', {
      token: app.apiKey,
      headers: { 'idempotency-key': 'replay-1' },
      body: { input: { watermarkText: input.watermarkText, sourceZip: input.sourceZip }, ...rest },
    });
    expect(again.status).toBe(200);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    const { current, ...original } = again.body;
    expect(original).toEqual(first.body);
    expect(current.task.id).toBe(first.body.task.id);

    const reused = await h.request('POST', '/v1/tasks', {
      token: app.apiKey,
      headers: { 'idempotency-key': 'replay-1' },
      body: taskBody({ name: 'Other photos' }),
    });
    expect(reused.status).toBe(409);
    expect(reused.headers.get('content-type')).toContain('application/problem+json');
    expect(reused.body.code).toBe('IDEMPOTENCY_KEY_REUSED');
    // The key is the application's own, so the task holding it is the caller's to know.
    expect(reused.body.detail).toContain(`task ${first.body.task.id}`);
    expect(await counts()).toEqual(before);
  });

  it('replays the original answer beside the task as it stands now, long after it finished', async () => {
    const first = await h.request('POST', '/v1/tasks', {
      token: app.apiKey,
      headers: { 'idempotency-key': 'replay-finished' },
      body: taskBody(),
    });
    expect(first.status).toBe(201);
    expect(first.body.current).toBeUndefined();
    // No worker runs here; finish the task the way the orchestrator does.
    await sql`UPDATE task SET lifecycle_status = 'SUCCEEDED', version = 2 WHERE id = ${first.body.task.id}`;
    await sql`UPDATE execution SET status = 'SUCCEEDED', completed_at = now() WHERE id = ${first.body.execution.id}`;

    const again = await h.request('POST', '/v1/tasks', {
      token: app.apiKey,
      headers: { 'idempotency-key': 'replay-finished' },
      body: taskBody(),
    });
    expect(again.status).toBe(200);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    // The creation's result is kept as it was; `current` says what is true now.
    expect(again.body.task).toEqual(first.body.task);
    expect(again.body.execution).toEqual(first.body.execution);
    expect(again.body.current.task).toMatchObject({ id: first.body.task.id, lifecycleStatus: 'SUCCEEDED' });
    expect(again.body.current.execution).toMatchObject({ id: first.body.execution.id, status: 'SUCCEEDED' });
    const read = await h.request('GET', `/v1/tasks/${first.body.task.id}`, { token: app.apiKey });
    expect(again.body.current.task).toEqual(read.body.task);
  });

  it('treats a retry that spells out the defaults as the same request', async () => {
    // A workflow whose input may be left out, so `input: {}` is a default too.
    const zip = zipWorkflow('open-input');
    const open = {
      ...zip,
      inputSchema: { type: 'object' },
      steps: [
        { ...zip.steps[0]!, inputMapping: { source: { from: '$.input.sourceZip', optional: true } } },
        zip.steps[1]!,
      ],
    };
    expect(
      (await h.request('POST', '/v1/workflow-definitions', { token: app.apiKey, body: open })).status,
    ).toBe(201);
    const withoutInput = { workflowName: 'open-input', workflowVersion: '1', name: 'Defaults left out' };
    const first = await h.request('POST', '/v1/tasks', {
      token: app.apiKey,
      headers: { 'idempotency-key': 'defaults-1' },
      body: withoutInput,
    });
    expect(first.status).toBe(201);
    expect(first.body.task.priority).toBe(50);
    const before = await counts();
    const spelled = await h.request('POST', '/v1/tasks', {
      token: app.apiKey,
      headers: { 'idempotency-key': 'defaults-1' },
      body: { ...withoutInput, priority: 50, stepConstraints: {}, input: {} },
    });
    expect(spelled.status).toBe(200);
    expect(spelled.headers.get('idempotent-replayed')).toBe('true');
    expect(spelled.body.task.id).toBe(first.body.task.id);
    // Another value than the default is another request.
    const other = await h.request('POST', '/v1/tasks', {
      token: app.apiKey,
      headers: { 'idempotency-key': 'defaults-1' },
      body: { ...withoutInput, priority: 51 },
    });
    expect(other.status).toBe(409);
    expect(await counts()).toEqual(before);
  });

  it('creates exactly one task for 50 concurrent identical requests', async () => {
    const responses = await Promise.all(
      Array.from({ length: 50 }, () =>
        h.request('POST', '/v1/tasks', {
          token: app.apiKey,
          headers: { 'idempotency-key': 'storm-1' },
          body: taskBody({ externalRef: 'storm' }),
        }),
      ),
    );
    const statuses = responses.map((r) => r.status).sort();
    expect(statuses.filter((s) => s === 201)).toHaveLength(1);
    expect(statuses.filter((s) => s === 200)).toHaveLength(49);
    expect(new Set(responses.map((r) => r.body.task.id)).size).toBe(1);
    expect(new Set(responses.map((r) => r.body.execution.id)).size).toBe(1);
    const [row] = await sql`SELECT count(*) AS n FROM task WHERE external_ref = 'storm'`;
    expect(row!.n).toBe(1n);
  });

  it('scopes idempotency keys to the caller', async () => {
    const other = await h.createApplicationIn(app.tenantId);
    const mine = await h.request('POST', '/v1/tasks', {
      token: app.apiKey,
      headers: { 'idempotency-key': 'shared-key' },
      body: taskBody(),
    });
    const theirs = await h.request('POST', '/v1/tasks', {
      token: other.apiKey,
      headers: { 'idempotency-key': 'shared-key' },
      body: taskBody(),
    });
    expect(mine.status).toBe(201);
    expect(theirs.status).toBe(201);
    expect(theirs.body.task.id).not.toBe(mine.body.task.id);
  });

  describe('bad input gets a clear 4xx and writes nothing', () => {
    const cases: [string, () => Promise<{ status: number; body: any }>, number, string][] = [
      [
        'no credentials',
        () => h.request('POST', '/v1/tasks', { headers: { 'idempotency-key': 'b1' }, body: taskBody() }),
        401,
        'UNAUTHENTICATED',
      ],
      [
        'a wrong API key',
        () =>
          h.request('POST', '/v1/tasks', {
            token: `${app.apiKey.slice(0, -2)}xx`,
            headers: { 'idempotency-key': 'b1' },
            body: taskBody(),
          }),
        401,
        'UNAUTHENTICATED',
      ],
      [
        'malformed JSON',
        () =>
          h.request('POST', '/v1/tasks', {
            token: app.apiKey,
            headers: { 'idempotency-key': 'b1' },
            rawBody: '{"workflowName": ',
          }),
        400,
        'MALFORMED_JSON',
      ],
      [
        'a wrong type',
        () =>
          h.request('POST', '/v1/tasks', {
            token: app.apiKey,
            headers: { 'idempotency-key': 'b1' },
            body: taskBody({ priority: '70' }),
          }),
        400,
        'VALIDATION_FAILED',
      ],
      [
        'an unknown field',
        () =>
          h.request('POST', '/v1/tasks', {
            token: app.apiKey,
            headers: { 'idempotency-key': 'b1' },
            body: taskBody({ colour: 'blue' }),
          }),
        400,
        'VALIDATION_FAILED',
      ],
      [
        'a missing Idempotency-Key',
        () => h.request('POST', '/v1/tasks', { token: app.apiKey, body: taskBody() }),
        400,
        'IDEMPOTENCY_KEY_REQUIRED',
      ],
      [
        'an unknown workflow',
        () =>
          h.request('POST', '/v1/tasks', {
            token: app.apiKey,
            headers: { 'idempotency-key': 'b1' },
            body: taskBody({ workflowName: 'nope' }),
          }),
        422,
        'UNKNOWN_WORKFLOW',
      ],
      [
        'an unknown version',
        () =>
          h.request('POST', '/v1/tasks', {
            token: app.apiKey,
            headers: { 'idempotency-key': 'b1' },
            body: taskBody({ workflowVersion: '9' }),
          }),
        422,
        'UNKNOWN_WORKFLOW',
      ],
      [
        'input failing its schema',
        () =>
          h.request('POST', '/v1/tasks', {
            token: app.apiKey,
            headers: { 'idempotency-key': 'b1' },
            body: taskBody({ input: { watermarkText: 'x' } }),
          }),
        422,
        'INPUT_INVALID',
      ],
      [
        'a plain-http callback URL',
        () =>
          h.request('POST', '/v1/tasks', {
            token: app.apiKey,
            headers: { 'idempotency-key': 'b1' },
            body: taskBody({ callbackUrl: 'http://app.example/cb' }),
          }),
        422,
        'CALLBACK_URL_INVALID',
      ],
      [
        'credentials in the callback URL',
        () =>
          h.request('POST', '/v1/tasks', {
            token: app.apiKey,
            headers: { 'idempotency-key': 'b1' },
            body: taskBody({ callbackUrl: 'https://u:p@app.example/cb' }),
          }),
        422,
        'CALLBACK_URL_INVALID',
      ],
      [
        'constraints for an unknown step',
        () =>
          h.request('POST', '/v1/tasks', {
            token: app.apiKey,
            headers: { 'idempotency-key': 'b1' },
            body: taskBody({ stepConstraints: { resize: { nodeId: 'n1' } } }),
          }),
        422,
        'STEP_CONSTRAINTS_INVALID',
      ],
      [
        'an oversize body',
        () =>
          h.request('POST', '/v1/tasks', {
            token: app.apiKey,
            headers: { 'idempotency-key': 'b1' },
            body: taskBody({ input: { sourceZip: 'x'.repeat(1_100_000) } }),
          }),
        413,
        'PAYLOAD_TOO_LARGE',
      ],
    ];
    it.each(cases)('%s', async (_name, send, status, code) => {
      const before = await counts();
      const res = await send();
      expect(res.status).toBe(status);
      expect(res.body.code).toBe(code);
      expect(res.body.type).toBe(`urn:tdp:error:${code}`);
      expect(typeof res.body.detail).toBe('string');
      expect(await counts()).toEqual(before);
    });

    it('points at the offending field', async () => {
      const res = await h.request('POST', '/v1/tasks', {
        token: app.apiKey,
        headers: { 'idempotency-key': 'b2' },
        body: taskBody({ input: { sourceZip: 5 } }),
      });
      expect(res.body.errors).toEqual([{ path: '/input/sourceZip', message: 'must be string' }]);
      const unknown = await h.request('POST', '/v1/tasks', {
        token: app.apiKey,
        headers: { 'idempotency-key': 'b2' },
        body: taskBody({ colour: 1 }),
      });
      expect(unknown.body.errors).toEqual([{ path: '/', message: 'unknown field "colour"' }]);
    });
  });
});

describe('reading and cancelling tasks', () => {
  it('pages the task list with a cursor and finds tasks by externalRef', async () => {
    const fresh = await h.createApplicationIn(app.tenantId);
    const ids: string[] = [];
    for (let i = 0; i < 5; i += 1) {
      const res = await h.request('POST', '/v1/tasks', {
        token: fresh.apiKey,
        headers: { 'idempotency-key': `page-${i}` },
        body: taskBody({ externalRef: `ref-${i}` }),
      });
      ids.push(res.body.task.id);
    }
    const first = await h.request('GET', '/v1/tasks?limit=2', { token: fresh.apiKey });
    expect(first.body.items.map((t: any) => t.task.id)).toEqual([ids[4], ids[3]]);
    const second = await h.request('GET', `/v1/tasks?limit=2&cursor=${first.body.nextCursor}`, {
      token: fresh.apiKey,
    });
    expect(second.body.items.map((t: any) => t.task.id)).toEqual([ids[2], ids[1]]);
    const last = await h.request('GET', `/v1/tasks?limit=2&cursor=${second.body.nextCursor}`, {
      token: fresh.apiKey,
    });
    expect(last.body.items.map((t: any) => t.task.id)).toEqual([ids[0]]);
    expect(last.body.nextCursor).toBeNull();

    const byRef = await h.request('GET', '/v1/tasks?externalRef=ref-3', { token: fresh.apiKey });
    expect(byRef.body.items.map((t: any) => t.task.id)).toEqual([ids[3]]);
    expect((await h.request('GET', '/v1/tasks?limit=0', { token: fresh.apiKey })).status).toBe(400);
  });

  it('cancels idempotently: one CANCELLED fact, then the same answer', async () => {
    const created = await h.request('POST', '/v1/tasks', {
      token: app.apiKey,
      headers: { 'idempotency-key': 'cancel-1' },
      body: taskBody(),
    });
    const id = created.body.task.id;
    const cancelled = await h.request('POST', `/v1/tasks/${id}:cancel`, {
      token: app.apiKey,
      body: { reason: 'customer asked' },
    });
    expect(cancelled.status).toBe(200);
    expect(cancelled.body.task).toMatchObject({ lifecycleStatus: 'CANCELLED', version: '2' });
    expect(cancelled.body.execution).toMatchObject({ status: 'CANCELLED', version: '2' });
    expect(cancelled.body.execution.completedAt).not.toBeNull();
    expect(cancelled.body.execution.steps.map((s: any) => s.status)).toEqual(['CANCELLED', 'CANCELLED']);

    const again = await h.request('POST', `/v1/tasks/${id}:cancel`, { token: app.apiKey });
    expect(again.status).toBe(200);
    expect(again.body).toEqual(cancelled.body);
    const events =
      await sql`SELECT task_version, type, payload FROM task_event WHERE task_id = ${id} ORDER BY task_version`;
    expect(events.map((e) => e.type)).toEqual(['TASK_CREATED', 'TASK_CANCELLED']);
    expect(events[1]!.payload).toMatchObject({ previousStatus: 'CREATED', reason: 'customer asked' });
    const outbox = await sql`SELECT event_type FROM outbox_event WHERE aggregate_id = ${id} ORDER BY id`;
    expect(outbox.map((o) => o.event_type)).toEqual(['TASK_CREATED', 'TASK_CANCELLED']);

    const read = await h.request('GET', `/v1/tasks/${id}`, { token: app.apiKey });
    expect(read.body).toEqual(cancelled.body);
  });

  it('refuses to cancel a finished execution', async () => {
    const created = await h.request('POST', '/v1/tasks', {
      token: app.apiKey,
      headers: { 'idempotency-key': 'cancel-done' },
      body: taskBody(),
    });
    // No worker runs in this issue; finish the execution the way the orchestrator will.
    await sql`UPDATE execution SET status = 'SUCCEEDED' WHERE id = ${created.body.execution.id}`;
    const res = await h.request('POST', `/v1/tasks/${created.body.task.id}:cancel`, { token: app.apiKey });
    expect(res.status).toBe(409);
    expect(res.body.code).toBe('INVALID_TRANSITION');
  });

  it('answers 404 for unknown ids and rejects malformed ones', async () => {
    expect(
      (await h.request('GET', '/v1/tasks/01a22681-415a-7532-b6a9-adfdf4199183', { token: app.apiKey })).body
        .code,
    ).toBe('TASK_NOT_FOUND');
    expect((await h.request('GET', '/v1/tasks/not-a-uuid', { token: app.apiKey })).status).toBe(400);
    expect(
      (
        await h.request('POST', '/v1/tasks/01a22681-415a-7532-b6a9-adfdf4199183:cancel', {
          token: app.apiKey,
        })
      ).status,
    ).toBe(404);
  });
});

describe('isolation', () => {
  it("hides another application's and another tenant's tasks and definitions", async () => {
    const created = await h.request('POST', '/v1/tasks', {
      token: app.apiKey,
      headers: { 'idempotency-key': 'iso-1' },
      body: taskBody(),
    });
    const id = created.body.task.id;
    const sameTenant = await h.createApplicationIn(app.tenantId);
    const otherTenant = await h.createApplication();

    for (const intruder of [sameTenant, otherTenant]) {
      const read = await h.request('GET', `/v1/tasks/${id}`, { token: intruder.apiKey });
      expect(read.status).toBe(404);
      expect(read.body.code).toBe('TASK_NOT_FOUND');
      const cancel = await h.request('POST', `/v1/tasks/${id}:cancel`, { token: intruder.apiKey });
      expect(cancel.status).toBe(404);
      const list = await h.request('GET', '/v1/tasks?externalRef=order-1', { token: intruder.apiKey });
      expect(list.body.items).toEqual([]);
    }
    expect((await h.request('GET', `/v1/tasks/${id}`, { token: app.apiKey })).body.task.lifecycleStatus).toBe(
      'PENDING',
    );

    // Definitions are shared inside a tenant, invisible across tenants.
    const inTenant = await h.request('GET', '/v1/workflow-definitions/zip-clean-watermark/versions/1', {
      token: sameTenant.apiKey,
    });
    expect(inTenant.status).toBe(200);
    const across = await h.request('GET', '/v1/workflow-definitions/zip-clean-watermark/versions/1', {
      token: otherTenant.apiKey,
    });
    expect(across.status).toBe(404);
    const submit = await h.request('POST', '/v1/tasks', {
      token: otherTenant.apiKey,
      headers: { 'idempotency-key': 'iso-2' },
      body: taskBody(),
    });
    expect(submit.body.code).toBe('UNKNOWN_WORKFLOW');
  });
});

/**
 * Approval steps end to end on a real server, real PostgreSQL and a real worker: the step waits (task
 * RUNNING, businessStatus WAITING_USER_ACTION, the approvers' summary channels told once with
 * `requiresAction`), a user token approves or rejects through the API, a timeout applies `onTimeout`,
 * every bad request is refused with its own code and changes nothing, and a retried request with the
 * same Idempotency-Key gets its first answer.
 */
import { newId } from '@tdp/protocol';
import { Centrifuge } from 'centrifuge';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { type Harness, startHarness } from '../../../test/harness.ts';
import { completeWith, startTestWorker } from '../../../test/testWorker.ts';

let h: Harness;
let app: Awaited<ReturnType<Harness['createApplication']>>;
let other: Awaited<ReturnType<Harness['createApplication']>>;
let worker: Awaited<ReturnType<typeof startTestWorker>>;
/** While set, the `prepare` step waits for it (the approval step is not reached yet). */
let gate: Promise<void> | null = null;

/** prepare → review (an approval): `review`'s options per workflow. */
const reviewWorkflow = (name: string, approval: Record<string, unknown>) => ({
  name,
  version: '1',
  steps: [
    { key: 'prepare', capability: 'approval.prepare', capabilityVersion: '1', retry: { maxAttempts: 1 } },
    { key: 'review', kind: 'approval', dependsOn: ['prepare'], approval },
  ],
});

const approvers = { users: ['rita'], roles: ['reviewer'], projects: [] };
const workflows = [
  reviewWorkflow('approval-basic', {
    approvers,
    required: 1,
    allowSubmitter: false,
    timeoutMs: 60_000,
    onTimeout: 'REJECT',
    formSchema: {
      type: 'object',
      properties: { rating: { type: 'integer', minimum: 1, maximum: 5 } },
      additionalProperties: false,
    },
  }),
  reviewWorkflow('approval-two', { approvers, required: 2 }),
  reviewWorkflow('approval-fail', { approvers, timeoutMs: 60_000, onTimeout: 'FAIL' }),
  reviewWorkflow('approval-continue', { approvers, timeoutMs: 60_000, onTimeout: 'CONTINUE' }),
  // A capability step beside the approval: its end must not take WAITING_USER_ACTION away.
  {
    ...reviewWorkflow('approval-beside', { approvers }),
    steps: [
      ...reviewWorkflow('approval-beside', { approvers }).steps,
      { key: 'side', capability: 'approval.side', capabilityVersion: '1', dependsOn: ['prepare'] },
    ],
  },
];
/** Released by the test: the `side` step finishes only once the approval waits. */
let sideGate: Promise<void> = Promise.resolve();

beforeAll(async () => {
  h = await startHarness({ runLoops: true });
  app = await h.createApplication();
  other = await h.createApplication();
  const workerKey = (
    await h.request('POST', '/admin/v1/worker-credentials', { token: h.adminToken, body: {} })
  ).body.key;
  for (const workflow of workflows) {
    const published = await h.request('POST', '/v1/workflow-definitions', {
      token: app.apiKey,
      body: workflow,
    });
    expect(published.status, JSON.stringify(published.body)).toBe(201);
  }
  worker = await startTestWorker({
    baseUrl: h.url,
    workerKey,
    nodeId: 'node-approval',
    capabilities: [
      { name: 'approval.prepare', version: '1' },
      { name: 'approval.side', version: '1' },
    ],
    handler: async (command, report) => {
      await (command.capability === 'approval.side' ? sideGate : gate);
      return completeWith({ prepared: command.taskId })(command, report);
    },
  });
});
afterAll(async () => {
  for (const client of clients) client.disconnect();
  await worker?.stop();
  await h.close();
});

const status = async (taskId: string) =>
  (await h.request('GET', `/v1/tasks/${taskId}`, { token: app.apiKey })).body;
const review = async (taskId: string) =>
  (await status(taskId)).execution.steps.find((s: any) => s.key === 'review');
const waiting = (taskId: string) =>
  expect
    .poll(async () => (await review(taskId))?.waitingFor?.kind ?? null, { timeout: 15_000 })
    .toBe('approval');
const endOf = (taskId: string, lifecycle: string) =>
  expect.poll(async () => (await status(taskId)).task.lifecycleStatus, { timeout: 15_000 }).toBe(lifecycle);

async function userToken(
  userId: string,
  options: { roles?: string[]; projects?: string[]; apiKey?: string } = {},
): Promise<string> {
  const issued = await h.request('POST', '/v1/user-tokens', {
    token: options.apiKey ?? app.apiKey,
    body: { userId, roles: options.roles ?? [], projects: options.projects ?? [] },
  });
  expect(issued.status).toBe(201);
  return issued.body.token;
}

/** A task owned by olga that rita (user) and the reviewer role may see; mallory sees it but is no approver. */
async function submit(workflowName: string) {
  const key = newId();
  const created = await h.request('POST', '/v1/tasks', {
    token: app.apiKey,
    headers: { 'idempotency-key': key },
    body: {
      workflowName,
      workflowVersion: '1',
      name: `order ${key.slice(0, 8)}`,
      input: {},
      ownerId: 'olga',
    },
  });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  const taskId = created.body.task.id as string;
  for (const [principalType, principalId] of [
    ['USER', 'rita'],
    ['ROLE', 'reviewer'],
    ['USER', 'mallory'],
  ])
    expect(
      (
        await h.request('POST', `/v1/tasks/${taskId}/acl`, {
          token: app.apiKey,
          body: { principalType, principalId },
        })
      ).status,
    ).toBe(204);
  return taskId;
}

const decide = (
  taskId: string,
  action: 'approve' | 'reject',
  token: string,
  key: string | null,
  body: Record<string, unknown> = {},
  step = 'review',
) =>
  h.request('POST', `/v1/tasks/${taskId}/steps/${step}:${action}`, {
    token,
    body,
    headers: key ? { 'idempotency-key': key } : {},
  });

const clients: Centrifuge[] = [];
/** A user's summary channel through the real gateway, as their browser would follow it. */
async function followSummaries(userId: string) {
  const issued = (
    await h.request('POST', '/v1/realtime/connection-token', { token: app.apiKey, body: { userId } })
  ).body;
  const client = new Centrifuge(issued.url, { websocket: WebSocket, token: issued.token });
  clients.push(client);
  const received: any[] = [];
  client.on('publication', (ctx) => received.push(ctx.data));
  const connected = new Promise((resolve) => client.once('connected', resolve));
  client.connect();
  await connected;
  return received;
}

describe('an approval step', () => {
  it('waits for its approvers, tells each of them once, and succeeds on approval with the decisions', async () => {
    const rita = await followSummaries('rita');
    const olga = await followSummaries('olga');
    const taskId = await submit('approval-basic');
    await waiting(taskId);
    const view = await status(taskId);
    expect(view.task.lifecycleStatus).toBe('RUNNING');
    expect(view.task.businessStatus).toBe('WAITING_USER_ACTION');
    expect((await review(taskId)).waitingFor).toMatchObject({
      kind: 'approval',
      approvers,
      required: 1,
      decisions: [],
      since: expect.any(String),
      timeoutAt: expect.any(String),
    });

    // The approver's channel gets the action notice with the waiting fact, and only with it.
    await expect
      .poll(() => rita.filter((p) => p.taskId === taskId && p.notice?.requiresAction).length)
      .toBe(1);
    const notice = rita.find((p) => p.notice?.requiresAction)!.notice;
    expect(notice).toMatchObject({
      kind: 'ACTION_REQUIRED',
      severity: 'ACTION_REQUIRED',
      requiresAction: true,
    });
    // It is kept for the approver as an offline notification too; the owner (no approver) and mallory get none.
    const kept = async (userId: string) =>
      (await h.request('GET', '/v1/me/notifications', { token: await userToken(userId) })).body.items.filter(
        (n: any) => n.taskId === taskId,
      );
    expect(await kept('rita')).toMatchObject([
      { type: 'ACTION_REQUIRED', requiresAction: true, message: notice.message, readAt: null },
    ]);
    expect(await kept('olga')).toEqual([]);
    expect(await kept('mallory')).toEqual([]);

    const token = await userToken('rita');
    const key = newId();
    const approved = await decide(taskId, 'approve', token, key, {
      comment: 'looks right',
      data: { rating: 5 },
    });
    expect(approved.status, JSON.stringify(approved.body)).toBe(201);
    expect(approved.body).toMatchObject({
      taskId,
      stepKey: 'review',
      decision: 'APPROVE',
      decidedBy: 'user:rita',
      comment: 'looks right',
      data: { rating: 5 },
      outcome: 'APPROVED',
    });
    await endOf(taskId, 'SUCCEEDED');
    const step = await review(taskId);
    expect(step.status).toBe('SUCCEEDED');
    expect(step.waitingFor ?? null).toBeNull();
    expect(step.data).toEqual({
      decisions: [
        {
          decidedBy: 'user:rita',
          decision: 'APPROVE',
          comment: 'looks right',
          data: { rating: 5 },
          decidedAt: approved.body.decidedAt,
        },
      ],
    });
    expect((await status(taskId)).task.businessStatus).toBe('SUCCEEDED');

    // Later facts carry no action notice: each approver was told once; the owner was never asked.
    await expect
      .poll(() => rita.some((p) => p.taskId === taskId && p.lifecycleStatus === 'SUCCEEDED'))
      .toBe(true);
    expect(rita.filter((p) => p.taskId === taskId && p.notice?.requiresAction)).toHaveLength(1);
    await expect
      .poll(() => olga.some((p) => p.taskId === taskId && p.lifecycleStatus === 'SUCCEEDED'))
      .toBe(true);
    expect(olga.filter((p) => p.taskId === taskId && p.notice?.requiresAction)).toHaveLength(0);
    expect(olga.some((p) => p.taskId === taskId && p.businessStatus === 'WAITING_USER_ACTION')).toBe(true);

    // The same request with the same key: the first answer; nothing else happens.
    const versionAfter = (await status(taskId)).task.version;
    const replay = await decide(taskId, 'approve', token, key, {
      comment: 'looks right',
      data: { rating: 5 },
    });
    expect(replay.status).toBe(200);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(replay.body).toEqual(approved.body);
    expect((await status(taskId)).task.version).toBe(versionAfter);

    // The event log has the decision as its own fact.
    const events = (await h.request('GET', `/v1/tasks/${taskId}/events`, { token: app.apiKey })).body.items;
    expect(events.map((e: any) => e.eventType)).toEqual(
      expect.arrayContaining(['STEP_WAITING', 'APPROVAL_DECIDED', 'TASK_COMPLETED']),
    );
  });

  it('fails APPROVAL_REJECTED on a rejection; a different second decision is refused', async () => {
    const taskId = await submit('approval-basic');
    await waiting(taskId);
    const token = await userToken('rex', { roles: ['reviewer'] });
    const key = newId();
    const rejected = await decide(taskId, 'reject', token, key, { comment: 'wrong colour' });
    expect(rejected.status).toBe(201);
    expect(rejected.body).toMatchObject({ decision: 'REJECT', decidedBy: 'user:rex', outcome: 'REJECTED' });
    await endOf(taskId, 'FAILED');
    const view = await status(taskId);
    expect(view.task.failure).toMatchObject({ code: 'APPROVAL_REJECTED', failedStepId: 'review' });
    expect((await review(taskId)).error).toMatchObject({ code: 'APPROVAL_REJECTED', retryable: false });

    const changed = await decide(taskId, 'approve', token, newId());
    expect(changed.status).toBe(409);
    expect(changed.body.code).toBe('DECISION_CONFLICT');
    // The same decision again, even under a new key, is the first answer.
    const same = await decide(taskId, 'reject', token, newId(), { comment: 'wrong colour' });
    expect(same.status).toBe(200);
    expect(same.body).toEqual(rejected.body);
    expect((await status(taskId)).task.version).toBe(view.task.version);
  });

  it('needs `required` approvals: the first one is recorded and the step keeps waiting', async () => {
    const taskId = await submit('approval-two');
    await waiting(taskId);
    const first = await decide(taskId, 'approve', await userToken('rita'), newId());
    expect(first.body.outcome).toBe('PENDING');
    expect((await review(taskId)).waitingFor.decisions).toHaveLength(1);
    expect((await status(taskId)).task.businessStatus).toBe('WAITING_USER_ACTION');
    const second = await decide(taskId, 'approve', await userToken('rex', { roles: ['reviewer'] }), newId());
    expect(second.body.outcome).toBe('APPROVED');
    await endOf(taskId, 'SUCCEEDED');
    expect((await review(taskId)).data.decisions.map((d: any) => d.decidedBy)).toEqual([
      'user:rita',
      'user:rex',
    ]);
  });
});

describe('at the same time', () => {
  it('two approvers for one approval: one decides, the other finds it decided; one request twice: one answer', async () => {
    const taskId = await submit('approval-basic');
    await waiting(taskId);
    const [rita, rex] = [await userToken('rita'), await userToken('rex', { roles: ['reviewer'] })];
    const answers = await Promise.all([
      decide(taskId, 'approve', rita, newId()),
      decide(taskId, 'approve', rex, newId()),
    ]);
    expect(answers.map((a) => a.status).sort()).toEqual([201, 409]);
    expect(answers.find((a) => a.status === 409)!.body.code).toBe('STEP_NOT_WAITING');
    await endOf(taskId, 'SUCCEEDED');
    expect((await review(taskId)).data.decisions).toHaveLength(1);

    const other = await submit('approval-two');
    await waiting(other);
    const key = newId();
    const twice = await Promise.all([
      decide(other, 'approve', rita, key),
      decide(other, 'approve', rita, key),
    ]);
    expect(twice.map((a) => a.status).sort()).toEqual([200, 201]);
    expect(twice[0]!.body).toEqual(twice[1]!.body);
    expect((await review(other)).waitingFor.decisions).toHaveLength(1);
  });

  it('a cancelled task ends its wait; a decision after it is refused', async () => {
    const taskId = await submit('approval-basic');
    await waiting(taskId);
    const cancelled = await h.request('POST', `/v1/tasks/${taskId}:cancel`, { token: app.apiKey, body: {} });
    expect(cancelled.status).toBe(200);
    await endOf(taskId, 'CANCELLED');
    expect((await review(taskId)).status).toBe('CANCELLED');
    const late = await decide(taskId, 'approve', await userToken('rita'), newId());
    expect([late.status, late.body.code]).toEqual([409, 'STEP_NOT_WAITING']);
  });
});

describe('the waiting status', () => {
  it('stays WAITING_USER_ACTION while the approval waits, whatever else ends meanwhile', async () => {
    let release = () => {};
    sideGate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const taskId = await submit('approval-beside');
    try {
      await waiting(taskId);
      expect((await status(taskId)).task.businessStatus).toBe('WAITING_USER_ACTION');
    } finally {
      release();
    }
    const side = async () => (await status(taskId)).execution.steps.find((s: any) => s.key === 'side').status;
    await expect.poll(side, { timeout: 15_000 }).toBe('SUCCEEDED');
    const view = await status(taskId);
    expect([view.task.lifecycleStatus, view.task.businessStatus]).toEqual(['RUNNING', 'WAITING_USER_ACTION']);
    await decide(taskId, 'approve', await userToken('rita'), newId());
    await endOf(taskId, 'SUCCEEDED');
    expect((await status(taskId)).task.businessStatus).toBe('SUCCEEDED');
  });
});

describe('bad decisions are refused with their own code, change nothing, and answer the same again', () => {
  it('the table', async () => {
    let release = () => {};
    gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const early = await submit('approval-basic');
    // Its first step is with the worker, held there: the approval step is not reached yet.
    await expect.poll(() => worker.received.some((c) => c.taskId === early), { timeout: 15_000 }).toBe(true);
    const taskId = await submit('approval-basic');
    const rita = await userToken('rita');
    const cases: [string, () => Promise<{ status: number; body: any }>, number, string][] = [
      ['not waiting yet', () => decide(early, 'approve', rita, 'k-early'), 409, 'STEP_NOT_WAITING'],
      [
        'no such step',
        () => decide(early, 'approve', rita, 'k-step', {}, 'nope'),
        404,
        'STEP_NOT_REGISTERED',
      ],
      [
        'not an approval step',
        () => decide(early, 'approve', rita, 'k-kind', {}, 'prepare'),
        404,
        'STEP_NOT_REGISTERED',
      ],
    ];
    try {
      for (const [name, run, code, problem] of cases) {
        const before = (await status(early)).task.version;
        for (let i = 0; i < 2; i += 1) {
          const answer = await run();
          expect([name, answer.status, answer.body.code]).toEqual([name, code, problem]);
        }
        expect((await status(early)).task.version).toBe(before);
      }
    } finally {
      gate = null;
      release();
    }
    await waiting(taskId);
    await waiting(early);

    const foreign = await userToken('rita', { apiKey: other.apiKey });
    const waitingCases: [string, () => Promise<{ status: number; body: any }>, number, string][] = [
      [
        'the submitter (allowSubmitter false)',
        async () => decide(taskId, 'approve', await userToken('olga'), 'k1'),
        403,
        'NOT_AN_APPROVER',
      ],
      [
        'a viewer who is no approver',
        async () => decide(taskId, 'approve', await userToken('mallory'), 'k2'),
        403,
        'NOT_AN_APPROVER',
      ],
      [
        'an approver role without access',
        async () => decide(taskId, 'approve', await userToken('eve', { projects: ['x'] }), 'k3'),
        404,
        'TASK_NOT_FOUND',
      ],
      ["another application's token", () => decide(taskId, 'approve', foreign, 'k4'), 404, 'TASK_NOT_FOUND'],
      [
        'data against the form schema',
        () => decide(taskId, 'approve', rita, 'k5', { data: { rating: 9 } }),
        422,
        'DECISION_DATA_INVALID',
      ],
      ['no Idempotency-Key', () => decide(taskId, 'approve', rita, null), 400, 'IDEMPOTENCY_KEY_REQUIRED'],
      [
        'an API key instead of a user token',
        () => decide(taskId, 'approve', app.apiKey, 'k6'),
        401,
        'UNAUTHENTICATED',
      ],
      [
        'an unknown field',
        () => decide(taskId, 'approve', rita, 'k7', { verdict: 'yes' }),
        400,
        'VALIDATION_FAILED',
      ],
    ];
    for (const [name, run, code, problem] of waitingCases) {
      const before = await status(taskId);
      for (let i = 0; i < 2; i += 1) {
        const answer = await run();
        expect([name, answer.status, answer.body.code]).toEqual([name, code, problem]);
        expect(answer.body.type ?? answer.body.title).toBeTruthy();
      }
      const after = await status(taskId);
      expect([name, after.task.version]).toEqual([name, before.task.version]);
      expect((await review(taskId)).waitingFor.decisions).toEqual([]);
    }

    // A key used for one decision cannot carry another.
    const first = await decide(taskId, 'reject', rita, 'k-reused');
    expect(first.status).toBe(201);
    const reused = await decide(taskId, 'reject', rita, 'k-reused', { comment: 'something else' });
    expect([reused.status, reused.body.code]).toEqual([409, 'IDEMPOTENCY_KEY_REUSED']);

    // After the step was decided: not waiting (for someone else).
    await endOf(taskId, 'FAILED');
    const late = await decide(taskId, 'approve', await userToken('rex', { roles: ['reviewer'] }), 'k-late');
    expect([late.status, late.body.code]).toEqual([409, 'STEP_NOT_WAITING']);
  });
});

describe('the operator', () => {
  it('settles a step that needs two approvals with its own approval (an override, with its reason)', async () => {
    const taskId = await submit('approval-two');
    await waiting(taskId);
    const answer = await h.request('POST', `/admin/v1/tasks/${taskId}/steps/review:approve`, {
      token: h.adminToken,
      headers: { 'idempotency-key': newId() },
      body: { reason: 'both reviewers are away; approved by the head of unit' },
    });
    expect([answer.status, answer.body.outcome]).toEqual([201, 'APPROVED']);
    await endOf(taskId, 'SUCCEEDED');
    expect((await review(taskId)).data.decisions.map((d: any) => [d.decidedBy, d.reason ?? null])).toEqual([
      ['operator', 'both reviewers are away; approved by the head of unit'],
    ]);
  });

  it('approves from the admin API with a reason, kept with the decision and in the timeline', async () => {
    const taskId = await submit('approval-two');
    await waiting(taskId);
    const noReason = await h.request('POST', `/admin/v1/tasks/${taskId}/steps/review:approve`, {
      token: h.adminToken,
      headers: { 'idempotency-key': 'op-1' },
      body: {},
    });
    expect([noReason.status, noReason.body.code]).toEqual([400, 'VALIDATION_FAILED']);
    const answer = await h.request('POST', `/admin/v1/tasks/${taskId}/steps/review:reject`, {
      token: h.adminToken,
      headers: { 'idempotency-key': 'op-1' },
      body: { reason: 'customer cancelled by phone' },
    });
    expect(answer.status, JSON.stringify(answer.body)).toBe(201);
    expect(answer.body).toMatchObject({
      decidedBy: 'operator',
      reason: 'customer cancelled by phone',
      outcome: 'REJECTED',
    });
    await endOf(taskId, 'FAILED');
    const sql = postgres(h.databaseUrl, { max: 1 });
    try {
      const rows =
        await sql`SELECT decided_by, decision, reason FROM step_decision WHERE task_id = ${taskId}`;
      expect(rows).toEqual([
        { decided_by: 'operator', decision: 'REJECT', reason: 'customer cancelled by phone' },
      ]);
      // Decisions are immutable.
      await expect(
        sql`UPDATE step_decision SET decision = 'APPROVE' WHERE task_id = ${taskId}`,
      ).rejects.toThrow(/immutable/);
    } finally {
      await sql.end();
    }
    const timeline = (await h.request('GET', `/v1/tasks/${taskId}/timeline`, { token: app.apiKey })).body
      .items;
    expect(timeline.find((m: any) => m.kind === 'APPROVAL_DECIDED').message).toContain(
      'customer cancelled by phone',
    );
  });
});

// Last: the clock jump outlives the worker's heartbeat TTL.
describe('the timeout', () => {
  it('applies onTimeout: REJECT, FAIL and CONTINUE; a decision after it is refused', async () => {
    const rejected = await submit('approval-basic');
    const failed = await submit('approval-fail');
    const continued = await submit('approval-continue');
    for (const taskId of [rejected, failed, continued]) await waiting(taskId);
    const rita = await userToken('rita');
    // Past the deadline but before the timer fired, the deadline still holds.
    h.clock.advance(60_001);
    await endOf(rejected, 'FAILED');
    await endOf(failed, 'FAILED');
    await endOf(continued, 'SUCCEEDED');
    expect((await status(rejected)).task.failure.code).toBe('APPROVAL_REJECTED');
    expect((await status(failed)).task.failure.code).toBe('APPROVAL_TIMED_OUT');
    expect((await review(continued)).data).toEqual({ decisions: [], timedOut: true });
    for (const taskId of [rejected, failed, continued]) {
      const before = (await status(taskId)).task.version;
      const late = await decide(taskId, 'approve', rita, `late-${taskId}`);
      expect([late.status, late.body.code]).toEqual([409, 'APPROVAL_TIMED_OUT']);
      expect((await status(taskId)).task.version).toBe(before);
    }
  });
});

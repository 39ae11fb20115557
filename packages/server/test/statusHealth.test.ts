/**
 * Heartbeats, handles and the health reconciler (docs/design/execution-leases.md).
 */
import { newId } from '@tdp/protocol';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { type Harness, startHarness } from '../../../test/harness.ts';
import { coordinator, documentSteps } from '../../../test/statusFixture.ts';
import { TcpProxy } from '../../../test/tcpProxy.ts';
import { HealthReconciler } from '../src/core/status/healthReconciler.ts';
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

/** A running step with a 60 s heartbeat timeout. */
async function running() {
  const wf = await c.createWorkflow({
    tasks: [
      {
        clientTaskKey: 'hb',
        title: 'Heartbeats',
        knownSteps: [{ ...documentSteps[0], heartbeatTimeoutSeconds: 60 }],
      },
    ],
  });
  const taskId = wf.tasks[0]!.taskId;
  const ctx = await c.activate(taskId, '01_prepare');
  await c.report(ctx, c.event(ctx));
  return { taskId, ctx };
}

const beat = (items: Record<string, unknown>[], token?: string) =>
  h.request('POST', '/v1/task-heartbeats:batch', {
    ...(token ? { token } : {}),
    body: { heartbeats: items },
  });

const realtimeCount = async (taskId: string) =>
  Number((await sql`SELECT count(*) AS n FROM realtime_message WHERE aggregate_id = ${taskId}`)[0]!.n);

describe('heartbeats', () => {
  it('plain heartbeats renew the lease without a new task version or a realtime message', async () => {
    const { taskId, ctx } = await running();
    const version = (await c.task(taskId)).task.version;
    const messages = await realtimeCount(taskId);
    const res = await beat(
      [
        {
          executionToken: ctx.executionToken,
          taskId,
          stepId: ctx.stepId,
          stepAttempt: 1,
          executionId: ctx.executionId,
          heartbeatSeq: 1,
        },
        { executionHandle: ctx.executionHandle, heartbeatSeq: 2 },
      ],
      c.app.apiKey,
    );
    expect(res.body.results.map((r: any) => r.outcome)).toEqual(['ACCEPTED', 'ACCEPTED']);
    const task = await c.task(taskId);
    expect(task.task.version).toBe(version);
    expect(await realtimeCount(taskId)).toBe(messages);
    const [lease] =
      await sql`SELECT heartbeat_seq FROM execution_lease WHERE attempt_id = ${ctx.executionId}`;
    expect(lease!.heartbeat_seq).toBe(2n);
  });

  it('a heartbeat renews the narrow lease row and leaves the step row as it was; reads still see it', async () => {
    const { taskId, ctx } = await running();
    const stepRow = async () =>
      (await sql`SELECT xmin::text AS xmin, * FROM step WHERE attempt_id = ${ctx.executionId}`)[0]!;
    const before = await stepRow();
    h.clock.advance(20_000);
    const res = await beat([{ executionToken: ctx.executionToken, heartbeatSeq: 1 }]);
    expect(res.body.results[0].outcome).toBe('ACCEPTED');
    // No new version of the step row: the same tuple, every column as it was.
    expect(await stepRow()).toEqual(before);
    const [lease] = await sql`
      SELECT heartbeat_seq, last_heartbeat_at, health FROM execution_lease WHERE attempt_id = ${ctx.executionId}`;
    expect(lease).toMatchObject({ heartbeat_seq: 1n, last_heartbeat_at: h.clock.now(), health: 'HEALTHY' });
    // The task's reads take the lease's heartbeat.
    const detail = await c.task(taskId);
    expect(detail.execution.steps[0].lastHeartbeatAt).toBe(h.clock.now().toISOString());
    expect(
      (await beat([{ executionToken: ctx.executionToken, heartbeatSeq: 1 }])).body.results[0].outcome,
    ).toBe('DUPLICATE');
    // The attempt ends: its lease goes with it.
    const ended = await c.report(ctx, c.event(ctx, { sourceSeq: 2, eventType: 'STEP_FAILED' }));
    expect(ended.status).toBe(200);
    expect(await sql`SELECT 1 FROM execution_lease WHERE attempt_id = ${ctx.executionId}`).toHaveLength(0);
    h.clock.set(new Date());
  });

  it('a handle beating three times in one batch: every beat is accepted and the lease keeps the highest', async () => {
    const { ctx } = await running();
    const res = await beat(
      [6, 9, 7].map((heartbeatSeq) => ({ executionHandle: ctx.executionHandle, heartbeatSeq })),
      c.app.apiKey,
    );
    expect(res.body.results.map((r: any) => [r.outcome, r.executionId])).toEqual(
      [6, 9, 7].map(() => ['ACCEPTED', ctx.executionId]),
    );
    const [lease] =
      await sql`SELECT heartbeat_seq FROM execution_lease WHERE attempt_id = ${ctx.executionId}`;
    expect(lease!.heartbeat_seq).toBe(9n);
    expect(
      (await beat([{ executionHandle: ctx.executionHandle, heartbeatSeq: 8 }], c.app.apiKey)).body.results[0]
        .outcome,
    ).toBe('DUPLICATE');
  });

  it("answer 'exceptions' lists only the beats not plainly accepted, by index, with the accepted count", async () => {
    const { ctx } = await running();
    const other = await running();
    const short = (items: Record<string, unknown>[], answer: unknown) =>
      h.request('POST', '/v1/task-heartbeats:batch', {
        token: c.app.apiKey,
        body: { heartbeats: items, answer },
      });
    const res = await short(
      [
        { executionHandle: ctx.executionHandle, heartbeatSeq: 3 },
        { executionHandle: 'eh_not-a-handle-of-anyone', heartbeatSeq: 1 },
        { executionHandle: other.ctx.executionHandle, heartbeatSeq: 1 },
      ],
      'exceptions',
    );
    expect(res.status).toBe(200);
    expect(res.body.acceptedCount).toBe(2);
    expect(res.body.results).toEqual([
      {
        index: 1,
        attemptId: null,
        executionId: null,
        accepted: false,
        outcome: 'INVALID_CREDENTIAL',
        health: null,
      },
    ]);
    // The same beat again is a duplicate: the short answer names it.
    const again = await short([{ executionHandle: ctx.executionHandle, heartbeatSeq: 3 }], 'exceptions');
    expect(again.body).toMatchObject({ acceptedCount: 0, results: [{ index: 0, outcome: 'DUPLICATE' }] });
    // An answer the API does not know is refused and renews nothing.
    const wrong = await short([{ executionHandle: ctx.executionHandle, heartbeatSeq: 4 }], 'some');
    expect(wrong.status).toBe(400);
    expect(wrong.body.code).toBe('VALIDATION_FAILED');
    const [lease] =
      await sql`SELECT heartbeat_seq FROM execution_lease WHERE attempt_id = ${ctx.executionId}`;
    expect(lease!.heartbeat_seq).toBe(3n);
  });

  it('heartbeats renew on a pool of their own: they are answered while every main-pool connection waits', async () => {
    const { ctx } = await running();
    // The first beat also puts the API key in the cache, so the next one needs the database only for the
    // renewal.
    expect(
      (await beat([{ executionHandle: ctx.executionHandle, heartbeatSeq: 1 }], c.app.apiKey)).body.results[0]
        .outcome,
    ).toBe('ACCEPTED');
    const holder = await sql.reserve();
    await holder`SELECT pg_advisory_lock(4242)`;
    // The harness's main pool has 10 connections: each waits on the lock this test holds.
    const waiting = Array.from({ length: 10 }, () =>
      h.server.sql`SELECT pg_advisory_xact_lock_shared(4242)`.execute(),
    );
    try {
      await expect
        .poll(async () =>
          Number(
            (
              await sql`SELECT count(*) AS n FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND objid = 4242`
            )[0]!.n,
          ),
        )
        .toBe(10);
      const answer = await Promise.race([
        beat([{ executionHandle: ctx.executionHandle, heartbeatSeq: 2 }], c.app.apiKey),
        new Promise<null>((resolve) => setTimeout(() => resolve(null), 5_000)),
      ]);
      expect(answer?.body.results[0].outcome).toBe('ACCEPTED');
    } finally {
      await holder`SELECT pg_advisory_unlock(4242)`;
      holder.release();
      await Promise.all(waiting);
    }
  });

  it('old attempts, a wrong executionId and a non-increasing heartbeatSeq cannot renew the lease', async () => {
    const { taskId, ctx } = await running();
    await beat([{ executionToken: ctx.executionToken, heartbeatSeq: 5 }]);
    const res = await beat([
      { executionToken: ctx.executionToken, heartbeatSeq: 5 },
      { executionToken: ctx.executionToken, heartbeatSeq: 6, executionId: newId() },
      { executionToken: 'not-a-token-at-all', heartbeatSeq: 7 },
    ]);
    expect(res.body.results.map((r: any) => r.outcome)).toEqual([
      'DUPLICATE',
      'WRONG_EXECUTION',
      'INVALID_CREDENTIAL',
    ]);
    // End the attempt and start a new one: the old credential cannot renew anything.
    await c.report(ctx, c.event(ctx, { sourceSeq: 2, eventType: 'STEP_FAILED' }));
    expect(
      (await beat([{ executionToken: ctx.executionToken, heartbeatSeq: 8 }])).body.results[0].outcome,
    ).toBe('TERMINAL');
    const retry = await c.activate(taskId, '01_prepare', 2);
    expect(
      (await beat([{ executionToken: ctx.executionToken, heartbeatSeq: 9 }])).body.results[0].outcome,
    ).toBe('STALE_ATTEMPT');
    expect(
      (await beat([{ executionToken: retry.executionToken, heartbeatSeq: 1 }])).body.results[0].outcome,
    ).toBe('NOT_RUNNING');
  });

  it('each executionId of one service has its own sourceSeq and heartbeatSeq; reports never cross tasks', async () => {
    const one = await running();
    const two = await running();
    // The same producer runs both: sequence 2 on one does not touch the other.
    expect(
      (await c.report(one.ctx, c.event(one.ctx, { sourceSeq: 2, eventType: 'STEP_PROGRESS' }))).status,
    ).toBe(200);
    expect(
      (await c.report(two.ctx, c.event(two.ctx, { sourceSeq: 2, eventType: 'STEP_PROGRESS' }))).status,
    ).toBe(200);
    const res = await beat([
      { executionToken: one.ctx.executionToken, heartbeatSeq: 1 },
      { executionToken: two.ctx.executionToken, heartbeatSeq: 1 },
    ]);
    expect(res.body.results.map((r: any) => r.executionId)).toEqual([
      one.ctx.executionId,
      two.ctx.executionId,
    ]);
    expect(res.body.results.every((r: any) => r.accepted)).toBe(true);
    // A token never reports for another task, even when the body names it.
    const crossed = await c.report(
      one.ctx,
      c.event(one.ctx, {
        sourceSeq: 3,
        eventType: 'STEP_PROGRESS',
        taskId: two.taskId,
        workflowId: two.ctx.workflowId,
      }),
    );
    expect(crossed.body.code).toBe('EXECUTION_CREDENTIAL_INVALID');
  });

  it('a compact executionHandle resolves to the current execution only; expired, revoked, foreign and old-attempt handles are refused', async () => {
    const { taskId, ctx } = await running();
    const compact = (handle: string, seq: number, token = c.app.apiKey) =>
      h.request('POST', '/v1/task-events', {
        token,
        body: { executionHandle: handle, eventId: newId(), eventType: 'STEP_PROGRESS', sourceSeq: seq },
      });
    expect((await compact(ctx.executionHandle, 2)).body).toMatchObject({
      accepted: true,
      taskId,
      stepId: '01_prepare',
    });
    // Another application's key with this handle.
    const stranger = await h.createApplication();
    expect((await compact(ctx.executionHandle, 3, stranger.apiKey)).body.code).toBe(
      'EXECUTION_CREDENTIAL_INVALID',
    );
    // After the attempt ended and a retry began, the old handle is stale.
    await c.report(ctx, c.event(ctx, { sourceSeq: 3, eventType: 'STEP_FAILED' }));
    const retry = await c.activate(taskId, '01_prepare', 2);
    expect((await compact(ctx.executionHandle, 4)).body.code).toBe('STALE_EXECUTION');
    expect((await compact(retry.executionHandle, 1)).body.accepted).toBe(true);
    const [revoked] = await sql`SELECT revoked_at FROM attempt WHERE id = ${ctx.executionId}`;
    expect(revoked!.revoked_at).not.toBeNull();
    // Expired: move past the credential lifetime.
    h.clock.advance(3_600_001);
    expect((await compact(retry.executionHandle, 2)).body.code).toBe('EXECUTION_CREDENTIAL_INVALID');
    expect(
      (await c.report(retry, c.event(retry, { sourceSeq: 2, eventType: 'STEP_PROGRESS' }))).body.code,
    ).toBe('EXECUTION_CREDENTIAL_INVALID');
    h.clock.advance(-3_600_001);
  });
});

describe('the health reconciler', () => {
  it('STALE only changes health, never the lifecycle; recovery by heartbeat is one HEALTHY version change', async () => {
    const { taskId, ctx } = await running();
    const reconciler = new HealthReconciler(h.server.status, { graceMs: 0, maxPerCycle: 100 });
    h.clock.advance(61_000);
    expect(await reconciler.reconcile()).toBeGreaterThanOrEqual(1);
    const stale = await c.task(taskId);
    expect(stale.task).toMatchObject({ lifecycleStatus: 'RUNNING', health: 'STALE' });
    expect(stale.execution.steps[0]).toMatchObject({ status: 'RUNNING', health: 'STALE' });
    const staleVersion = BigInt(stale.task.version);
    // Nothing marks it FAILED, however long it stays stale.
    h.clock.advance(30 * 60_000);
    await reconciler.reconcile();
    expect((await c.task(taskId)).task.lifecycleStatus).toBe('RUNNING');

    const first = await beat([{ executionToken: ctx.executionToken, heartbeatSeq: 1 }]);
    expect(first.body.results[0]).toMatchObject({ outcome: 'RECOVERED', health: 'HEALTHY' });
    const second = await beat([{ executionToken: ctx.executionToken, heartbeatSeq: 2 }]);
    expect(second.body.results[0].outcome).toBe('ACCEPTED');
    const recovered = await c.task(taskId);
    expect(recovered.task.health).toBe('HEALTHY');
    expect(BigInt(recovered.task.version)).toBe(staleVersion + 1n);
    const changes = (await c.call('GET', `/v1/tasks/${taskId}/events`)).body.items.filter(
      (e: any) => e.eventType === 'STEP_HEALTH_CHANGED',
    );
    expect(changes.map((e: any) => e.payload.health)).toEqual(['STALE', 'HEALTHY']);
    const [summary] =
      await sql`SELECT payload FROM realtime_message WHERE aggregate_id = ${taskId} AND aggregate_version = ${staleVersion} AND projection = 'TASK_DETAIL'`;
    expect(summary!.payload.state.health).toBe('STALE');
    h.clock.set(new Date());
  });

  it('after the database was unreachable longer than the heartbeat timeout, it waits a grace period instead of marking everyone STALE', async () => {
    const target = new URL(inject('databaseAdminUrl'));
    const proxy = new TcpProxy(target.hostname, Number(target.port || 5432));
    await proxy.start();
    const own = await startHarness({
      healthGraceMs: 90_000,
      serverDatabaseUrl: (url) => {
        const through = new URL(url);
        through.hostname = '127.0.0.1';
        through.port = String(proxy.port);
        return through.toString();
      },
    });
    try {
      const oc = await coordinator(own);
      const alive: { taskId: string; token: string }[] = [];
      for (let i = 0; i < 3; i += 1) {
        const wf = await oc.createWorkflow({
          tasks: [
            {
              clientTaskKey: 'k',
              title: 'T',
              knownSteps: [{ ...documentSteps[0], heartbeatTimeoutSeconds: 60 }],
            },
          ],
        });
        const ctx = await oc.activate(wf.tasks[0]!.taskId, '01_prepare');
        await oc.report(ctx, oc.event(ctx));
        alive.push({ taskId: wf.tasks[0]!.taskId, token: ctx.executionToken });
      }
      const reconciler = new HealthReconciler(own.server.status, { graceMs: 90_000, maxPerCycle: 100 });
      let seq = 0;
      const beatAll = async (tasks: typeof alive) => {
        seq += 1;
        const items = tasks.map((t) => ({ executionToken: t.token, heartbeatSeq: seq }));
        const res = await own.request('POST', '/v1/task-heartbeats:batch', { body: { heartbeats: items } });
        expect(res.body.results.every((r: { accepted: boolean }) => r.accepted)).toBe(true);
      };
      own.clock.advance(50_000);
      await beatAll(alive);
      own.clock.advance(45_000); // start-up grace is over; every deadline is still ahead
      expect(await reconciler.reconcile()).toBe(0);

      // The database goes away for longer than the heartbeat timeout: no heartbeat can land.
      await proxy.cut();
      own.clock.advance(120_000);
      await expect(reconciler.reconcile()).rejects.toThrow();
      reconciler.databaseFailed();
      await proxy.restore();

      // Back: every step is past its deadline, but the reconciler first waits out a new grace period...
      await expect
        .poll(
          async () =>
            reconciler.reconcile().then(
              (n) => n,
              () => -1,
            ),
          { timeout: 10_000 },
        )
        .toBe(0);
      const health = async () =>
        Promise.all(
          alive.map(
            async (t) =>
              (await own.request('GET', `/v1/tasks/${t.taskId}`, { token: oc.app.apiKey })).body.task.health,
          ),
        );
      expect(await health()).toEqual(['HEALTHY', 'HEALTHY', 'HEALTHY']);
      own.clock.advance(60_000);
      expect(await reconciler.reconcile()).toBe(0);
      // ...in which the two live workers heartbeat again; the third worker really died.
      await beatAll(alive.slice(0, 2));
      own.clock.advance(31_000);
      expect(await reconciler.reconcile()).toBe(1);
      expect(await health()).toEqual(['HEALTHY', 'HEALTHY', 'STALE']);
    } finally {
      await own.close();
      await proxy.cut();
    }
  });
});

/**
 * The operator's drain (`POST /admin/v1/workers/{id}:drain`) end to end on a real worker process
 * (`startWorker` in a program of its own): the session turns DRAINING and is placed on no more, the
 * running attempt finishes (it is not handed back), the process exits 0 by itself, and the session is
 * gone once its heartbeats have stopped for the TTL. The action is audited with who and why. Bad input
 * (an unknown session, no reason) is a problem with its code, and changes nothing.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { newId } from '@tdp/protocol';
import { connectDatabase } from '@tdp/server';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { type Harness, startHarness } from '../../../test/harness.ts';
import { startWorkerProgramProcess } from './support.ts';

/** Past the harness's worker heartbeat TTL (30 s). */
const pastHeartbeatTtlMs = 60_000;
let h: Harness;
let app: Awaited<ReturnType<Harness['createApplication']>>;
let workerKey: string;
const directory = mkdtempSync(join(tmpdir(), 'tdp-operator-drain-test-'));

beforeAll(async () => {
  h = await startHarness({ runLoops: true });
  app = await h.createApplication();
  workerKey = (await h.request('POST', '/admin/v1/worker-credentials', { token: h.adminToken, body: {} }))
    .body.key;
  await h.request('POST', '/v1/workflow-definitions', {
    token: app.apiKey,
    body: {
      name: 'slow-wf',
      version: '1',
      steps: [{ key: 'only', capability: 'test.slow', capabilityVersion: '1', retry: { maxAttempts: 2 } }],
    },
  });
});
afterAll(() => h.close());

const submit = async () =>
  (
    await h.request('POST', '/v1/tasks', {
      token: app.apiKey,
      headers: { 'idempotency-key': newId() },
      body: { workflowName: 'slow-wf', workflowVersion: '1', name: 'slow', input: {} },
    })
  ).body.task.id as string;
const task = async (taskId: string) =>
  (await h.request('GET', `/v1/tasks/${taskId}`, { token: app.apiKey })).body;
const session = async (workerId: string) =>
  ((await h.request('GET', '/v1/workers', { token: h.adminToken })).body as Record<string, unknown>[]).find(
    (s) => s.id === workerId,
  );
const drain = (workerId: string, body: unknown) =>
  h.request('POST', `/admin/v1/workers/${workerId}:drain`, { token: h.adminToken, body });

it('drains a worker: DRAINING, the running attempt finishes, nothing new is placed, the process exits 0, the session is gone; audited', async () => {
  const { child, workerId, exited } = await startWorkerProgramProcess({
    baseUrl: h.url,
    workerKey,
    dbPath: join(directory, 'drained.db'),
    nodeId: 'node-drained',
    slowMs: 2_000,
  });
  try {
    expect(await session(workerId)).toMatchObject({ runtimeState: 'READY' });

    // Bad input first: each a problem with its code, and the session is left as it was.
    const unknown = await drain(newId(), { reason: 'no such worker' });
    expect(unknown.status).toBe(404);
    expect(unknown.headers.get('content-type')).toMatch(/application\/problem\+json/);
    expect(unknown.body.code).toBe('WORKER_NOT_FOUND');
    const noReason = await drain(workerId, {});
    expect(noReason.status).toBe(400);
    expect(noReason.body.code).toBe('VALIDATION_FAILED');
    expect((await drain(workerId, { reason: '' })).status).toBe(400);
    const withoutToken = await h.request('POST', `/admin/v1/workers/${workerId}:drain`, {
      body: { reason: 'x' },
    });
    expect(withoutToken.status).toBe(401);
    expect(await session(workerId)).toMatchObject({ runtimeState: 'READY' });

    const running = await submit();
    await expect
      .poll(async () => (await task(running)).execution.steps[0]?.status, { timeout: 15_000 })
      .toBe('RUNNING');

    const drained = await drain(workerId, { reason: 'kernel upgrade on node-drained' });
    expect(drained.status).toBe(202);
    expect(drained.body).toMatchObject({ workerId });
    expect(await session(workerId)).toMatchObject({ runtimeState: 'DRAINING' });

    // Submitted after the drain: the draining session is passed over (no other worker offers it).
    const later = await submit();

    // The running attempt is let finish, not handed back: one attempt, SUCCEEDED.
    await expect
      .poll(async () => (await task(running)).task.lifecycleStatus, { timeout: 15_000 })
      .toBe('SUCCEEDED');
    expect((await task(running)).execution.steps[0]).toMatchObject({ attempt: 1, status: 'SUCCEEDED' });

    expect(await exited).toEqual({ code: 0, signal: null });
    expect((await task(later)).execution.steps[0]?.status).not.toBe('RUNNING');
    expect((await task(later)).task.lifecycleStatus).not.toBe('SUCCEEDED');

    // Its heartbeats have stopped: once the TTL has passed, the session is gone.
    h.clock.advance(pastHeartbeatTtlMs);
    await expect.poll(() => session(workerId), { timeout: 15_000 }).toBeUndefined();

    const sql = connectDatabase({ url: h.databaseUrl, maxConnections: 1 });
    try {
      const audit = await sql`
        SELECT action, actor, reason, details FROM operator_audit WHERE subject_id = ${workerId}`;
      expect(audit).toEqual([
        {
          action: 'WORKER_DRAIN',
          actor: 'bootstrap admin token',
          reason: 'kernel upgrade on node-drained',
          details: { commandId: drained.body.commandId },
        },
      ]);
      const [command] =
        await sql`SELECT type, acked_at FROM worker_command WHERE id = ${drained.body.commandId}`;
      expect(command).toMatchObject({ type: 'DRAIN' });
      expect(command!.acked_at).not.toBeNull();
    } finally {
      await sql.end();
    }
  } finally {
    child.kill('SIGKILL');
  }
}, 90_000);

/**
 * The operator's node drain (`POST /admin/v1/nodes/{id}:drain`) end to end on real worker processes
 * (`startWorker`, two sessions on one node, each a program of its own): the node is CORDONED, each
 * session turns DRAINING and gets one DRAIN command, the running attempt finishes where it runs,
 * nothing new is placed, both processes exit 0. Draining again (the node or one of its sessions) answers
 * the same and writes nothing. Uncordoned, a worker that starts on the node takes the waiting step.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { newId } from '@tdp/protocol';
import { connectDatabase } from '@tdp/server';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { type Harness, startHarness } from '../../../test/harness.ts';
import { killAllWorkerProcesses, startWorkerProgramProcess } from './support.ts';

let h: Harness;
let app: Awaited<ReturnType<Harness['createApplication']>>;
let workerKey: string;
const directory = mkdtempSync(join(tmpdir(), 'tdp-node-drain-test-'));

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
afterAll(async () => {
  killAllWorkerProcesses();
  await h.close();
});

/** A worker process on node-drained (2 s steps); its session id and its exit. */
const startWorkerProcess = (name: string) =>
  startWorkerProgramProcess({
    baseUrl: h.url,
    workerKey,
    dbPath: join(directory, `${name}.db`),
    nodeId: 'node-drained',
    slowMs: 2_000,
  });

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
const sessions = async () =>
  (await h.request('GET', '/v1/workers', { token: h.adminToken })).body as Record<string, unknown>[];
const admin = (path: string, body: unknown) => h.request('POST', path, { token: h.adminToken, body });

it('drains a node: cordoned, every session DRAINING with one DRAIN, the running attempt finishes, both exit 0; repeated drains write nothing; uncordoned, it is placed on again', async () => {
  const [first, second] = await Promise.all([startWorkerProcess('first'), startWorkerProcess('second')]);
  const ids = [first.workerId, second.workerId].sort();
  expect((await sessions()).filter((s) => ids.includes(s.id as string)).map((s) => s.runtimeState)).toEqual([
    'READY',
    'READY',
  ]);

  const running = await submit();
  await expect
    .poll(async () => (await task(running)).execution.steps[0]?.status, { timeout: 15_000 })
    .toBe('RUNNING');

  const drained = await admin('/admin/v1/nodes/node-drained:drain', { reason: 'replacing the disk' });
  expect(drained.status).toBe(202);
  expect(drained.body.nodeId).toBe('node-drained');
  expect(drained.body.workers.map((w: { workerId: string }) => w.workerId).sort()).toEqual(ids);
  const mine = (await sessions()).filter((s) => ids.includes(s.id as string));
  expect(mine.map((s) => [s.runtimeState, s.nodeStatus])).toEqual([
    ['DRAINING', 'CORDONED'],
    ['DRAINING', 'CORDONED'],
  ]);

  // Again, the node and then one of its sessions: the same answers, nothing written.
  const again = await admin('/admin/v1/nodes/node-drained:drain', { reason: 'replacing the disk, again' });
  expect(again.status).toBe(202);
  expect(again.body).toEqual(drained.body);
  const oneSession = await admin(`/admin/v1/workers/${first.workerId}:drain`, { reason: 'just this one' });
  expect(oneSession.status).toBe(202);
  expect(oneSession.body).toEqual({
    workerId: first.workerId,
    commandId: drained.body.workers.find((w: { workerId: string }) => w.workerId === first.workerId)
      .commandId,
    auditId: drained.body.auditId,
  });

  const later = await submit();
  await expect
    .poll(async () => (await task(running)).task.lifecycleStatus, { timeout: 15_000 })
    .toBe('SUCCEEDED');
  expect((await task(running)).execution.steps[0]).toMatchObject({ attempt: 1, status: 'SUCCEEDED' });
  expect(await first.exited).toEqual({ code: 0, signal: null });
  expect(await second.exited).toEqual({ code: 0, signal: null });
  expect((await task(later)).execution.steps[0]?.status).not.toBe('RUNNING');

  const sql = connectDatabase({ url: h.databaseUrl, maxConnections: 1 });
  try {
    const commands = await sql<{ worker_id: string; acked: boolean }[]>`
      SELECT worker_id, acked_at IS NOT NULL AS acked FROM worker_command
      WHERE type = 'DRAIN' ORDER BY worker_id`;
    expect(commands).toEqual(ids.map((id) => ({ worker_id: id, acked: true })));
    // The placement actions (the tenant and application this test made are audited too).
    const audit = await sql`
      SELECT id, action, subject_id, reason FROM operator_audit WHERE action LIKE 'NODE_%' ORDER BY created_at`;
    expect(audit).toEqual([
      {
        id: drained.body.auditId,
        action: 'NODE_DRAIN',
        subject_id: 'node-drained',
        reason: 'replacing the disk',
      },
    ]);
  } finally {
    await sql.end();
  }

  // Uncordoned: a worker started on the node takes the step that waited.
  const uncordoned = await admin('/admin/v1/nodes/node-drained:uncordon', { reason: 'disk replaced' });
  expect(uncordoned.body).toMatchObject({ status: 'ACTIVE' });
  const third = await startWorkerProcess('third');
  await expect
    .poll(async () => (await task(later)).task.lifecycleStatus, { timeout: 20_000 })
    .toBe('SUCCEEDED');
  expect(await admin(`/admin/v1/workers/${third.workerId}:drain`, { reason: 'done' })).toMatchObject({
    status: 202,
  });
  expect(await third.exited).toEqual({ code: 0, signal: null });
}, 120_000);

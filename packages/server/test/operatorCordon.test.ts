/**
 * The operator's cordon of a worker session and of a node (`POST /admin/v1/{workers,nodes}/{id}:cordon`,
 * `:uncordon`): a cordoned session keeps its running attempt and is placed on no more (the waiting step
 * says why), nothing is sent to it; uncordoned, the waiting step is placed. Each call is audited, and the
 * audit reads back through `GET /admin/v1/audit` (filtered, paged). Bad input changes nothing.
 */
import { newId } from '@tdp/protocol';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { type Harness, startHarness } from '../../../test/harness.ts';
import { attemptEvent, type StartCommand, startTestWorker } from '../../../test/testWorker.ts';
import { defaultSettings } from '../src/main.ts';

let h: Harness;
let app: Awaited<ReturnType<Harness['createApplication']>>;
let worker: Awaited<ReturnType<typeof startTestWorker>>;
const commands: string[] = [];
/** Each attempt runs until the test lets it finish. */
const finish = new Map<string, () => Promise<void>>();

beforeAll(async () => {
  h = await startHarness({ runLoops: true });
  app = await h.createApplication();
  await h.request('POST', '/v1/workflow-definitions', {
    token: app.apiKey,
    body: {
      name: 'held-wf',
      version: '1',
      steps: [{ key: 'only', capability: 'test.held', capabilityVersion: '1' }],
    },
  });
  const key = (await h.request('POST', '/admin/v1/worker-credentials', { token: h.adminToken, body: {} }))
    .body.key as string;
  worker = await startTestWorker({
    baseUrl: h.url,
    workerKey: key,
    nodeId: 'node-cordon',
    capabilities: [{ name: 'test.held', version: '1' }],
    onCommand: (command) => commands.push(command.type),
    handler: async (command: StartCommand, report) => {
      await report([attemptEvent(command, 'STEP_STARTED', 1)]);
      finish.set(command.taskId, async () => {
        await report([attemptEvent(command, 'STEP_COMPLETED', 2, { output: {}, durationMs: 5 })]);
      });
    },
  });
});
afterAll(() => h.close());

const submit = async () =>
  (
    await h.request('POST', '/v1/tasks', {
      token: app.apiKey,
      headers: { 'idempotency-key': newId() },
      body: { workflowName: 'held-wf', workflowVersion: '1', name: 'held', input: {} },
    })
  ).body.task.id as string;
const step = async (taskId: string) =>
  (await h.request('GET', `/v1/tasks/${taskId}`, { token: app.apiKey })).body.execution.steps[0];
const admin = (path: string, body?: unknown) => h.request('POST', path, { token: h.adminToken, body });
const session = async () =>
  ((await h.request('GET', '/v1/workers', { token: h.adminToken })).body as Record<string, unknown>[]).find(
    (s) => s.id === worker.workerId,
  );
const placed = (taskId: string) => expect.poll(() => finish.has(taskId), { timeout: 10_000 }).toBe(true);
/**
 * Placed once the change is seen. A scheduler round that read the workers just before the change may
 * put the step back for the unplaceable retry interval (5 s): the test clock is moved past it.
 */
const placedAfterChange = async (taskId: string) => {
  h.clock.advance(defaultSettings.retryUnplaceableMs);
  await worker.heartbeat();
  await placed(taskId);
};
const waitingBecause = (taskId: string, reason: string) =>
  expect
    .poll(async () => ((await step(taskId)).unschedulableReasons ?? []).join('; '), { timeout: 10_000 })
    .toContain(reason);

it('a cordoned session keeps its running attempt and takes nothing new; uncordoned, it is placed on again', async () => {
  const running = await submit();
  await placed(running);

  const cordoned = await admin(`/admin/v1/workers/${worker.workerId}:cordon`, { reason: 'disk filling up' });
  expect(cordoned.status).toBe(200);
  expect(cordoned.body).toMatchObject({ workerId: worker.workerId, schedulingStatus: 'INELIGIBLE' });
  expect(await session()).toMatchObject({ runtimeState: 'READY', schedulingStatus: 'INELIGIBLE' });

  const waiting = await submit();
  await waitingBecause(waiting, 'worker is not eligible');
  expect(finish.has(waiting)).toBe(false);

  // The running attempt goes on and finishes on the cordoned session; no DRAIN was sent.
  await finish.get(running)!();
  await expect.poll(async () => (await step(running)).status, { timeout: 10_000 }).toBe('SUCCEEDED');
  expect(commands).not.toContain('DRAIN');
  expect(finish.has(waiting)).toBe(false);

  const uncordoned = await admin(`/admin/v1/workers/${worker.workerId}:uncordon`, { reason: 'disk cleaned' });
  expect(uncordoned.body).toMatchObject({ schedulingStatus: 'ELIGIBLE' });
  await placedAfterChange(waiting);
  await finish.get(waiting)!();
});

it('a cordoned node is placed on no more; uncordoned, it is', async () => {
  const cordoned = await admin('/admin/v1/nodes/node-cordon:cordon', { reason: 'rack maintenance' });
  expect(cordoned.status).toBe(200);
  expect(cordoned.body).toMatchObject({ nodeId: 'node-cordon', status: 'CORDONED' });
  // Asked again, the cordon writes nothing and answers the audit of the one that set it.
  const again = await admin('/admin/v1/nodes/node-cordon:cordon', { reason: 'clicked twice' });
  expect(again.body).toEqual(cordoned.body);
  const waiting = await submit();
  await waitingBecause(waiting, 'node node-cordon is CORDONED');
  expect(finish.has(waiting)).toBe(false);
  expect(await session()).toMatchObject({ nodeStatus: 'CORDONED', runtimeState: 'READY' });

  expect((await admin('/admin/v1/nodes/node-cordon:uncordon', { reason: 'rack back' })).body).toMatchObject({
    status: 'ACTIVE',
  });
  await placedAfterChange(waiting);
  await finish.get(waiting)!();
  expect(commands).not.toContain('DRAIN');
});

it('bad input is a problem with its code and changes nothing', async () => {
  const before = await session();
  const cases: [string, unknown, number, string][] = [
    [`/admin/v1/workers/${newId()}:cordon`, { reason: 'x' }, 404, 'WORKER_NOT_FOUND'],
    ['/admin/v1/nodes/no-such-node:cordon', { reason: 'x' }, 404, 'NODE_NOT_FOUND'],
    ['/admin/v1/nodes/no-such-node:drain', { reason: 'x' }, 404, 'NODE_NOT_FOUND'],
    [`/admin/v1/workers/${worker.workerId}:cordon`, {}, 400, 'VALIDATION_FAILED'],
    [`/admin/v1/workers/${worker.workerId}:cordon`, { reason: '' }, 400, 'VALIDATION_FAILED'],
    ['/admin/v1/nodes/node-cordon:drain', { reason: 'x', force: true }, 400, 'VALIDATION_FAILED'],
  ];
  for (const [path, body, status, code] of cases) {
    const answer = await admin(path, body);
    expect([path, answer.status, answer.body.code]).toEqual([path, status, code]);
    expect(answer.headers.get('content-type')).toMatch(/application\/problem\+json/);
  }
  // The management status is not set by the node's PUT (which neither audits nor asks why).
  const put = await h.request('PUT', '/admin/v1/nodes/node-cordon', {
    token: h.adminToken,
    body: { weight: 5, status: 'CORDONED' },
  });
  expect([put.status, put.body.code]).toEqual([400, 'VALIDATION_FAILED']);
  const anonymous = await h.request('POST', '/admin/v1/nodes/node-cordon:cordon', { body: { reason: 'x' } });
  expect(anonymous.status).toBe(401);
  expect(await session()).toMatchObject({
    nodeStatus: before!.nodeStatus,
    schedulingStatus: before!.schedulingStatus,
    runtimeState: before!.runtimeState,
  });
});

it('reads the audit back: newest first, by subject or action, a page at a time', async () => {
  const audit = (query: string, token = h.adminToken) =>
    h.request('GET', `/admin/v1/audit${query}`, { token });
  const ofWorker = await audit(`?subjectId=${worker.workerId}`);
  expect(ofWorker.status).toBe(200);
  expect(ofWorker.body.items.map((e: { action: string; reason: string }) => [e.action, e.reason])).toEqual([
    ['WORKER_UNCORDON', 'disk cleaned'],
    ['WORKER_CORDON', 'disk filling up'],
  ]);
  expect(ofWorker.body.items[0]).toMatchObject({
    subjectId: worker.workerId,
    actor: 'bootstrap admin token',
  });
  expect(ofWorker.body.nextCursor).toBeNull();

  const nodeCordons = await audit('?action=NODE_CORDON');
  expect(nodeCordons.body.items.map((e: { reason: string }) => e.reason)).toEqual(['rack maintenance']);

  // A page at a time: every action once (the repeated cordon wrote nothing), in the same order as one page.
  const all = (await audit('?limit=200')).body.items.map((e: { id: string }) => e.id);
  // The four placement actions, and the tenant and application this file created.
  expect(all).toHaveLength(6);
  const paged: string[] = [];
  let cursor: string | null = null;
  do {
    const page: { body: { items: { id: string }[]; nextCursor: string | null } } = await audit(
      `?limit=1${cursor ? `&cursor=${cursor}` : ''}`,
    );
    paged.push(...page.body.items.map((e) => e.id));
    cursor = page.body.nextCursor;
  } while (cursor);
  expect(paged).toEqual(all);

  expect((await audit('?cursor=bm9wZQ')).body.code).toBe('VALIDATION_FAILED');
  expect((await audit('?limit=0')).status).toBe(400);
  expect((await audit('', app.apiKey)).status).toBe(401);
});

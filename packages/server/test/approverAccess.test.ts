/**
 * Naming someone an approver is enough: an approver the task's ACL does not name (as a user, through a
 * role or a project) is given VIEW access with the fact that starts the wait, so the person asked to
 * decide sees the task in their list, reads it and decides. The grant is recorded with the fact and in
 * the timeline; an approver who could see the task already gets nothing new; someone the approvers do not
 * name still gets 404.
 */
import { newId } from '@tdp/protocol';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Harness, startHarness } from '../../../test/harness.ts';
import { completeWith, startTestWorker } from '../../../test/testWorker.ts';

let h: Harness;
let app: Awaited<ReturnType<Harness['createApplication']>>;
let worker: Awaited<ReturnType<typeof startTestWorker>>;
/** While set, the `prepare` step waits for it (the approval is not reached yet). */
let gate: Promise<void> = Promise.resolve();

beforeAll(async () => {
  h = await startHarness({ runLoops: true });
  app = await h.createApplication();
  const published = await h.request('POST', '/v1/workflow-definitions', {
    token: app.apiKey,
    body: {
      name: 'approver-access',
      version: '1',
      steps: [
        { key: 'prepare', capability: 'access.prepare', capabilityVersion: '1' },
        {
          key: 'review',
          kind: 'approval',
          dependsOn: ['prepare'],
          approval: { approvers: { users: ['rita', 'olga'], roles: ['legal'], projects: ['p1'] } },
        },
      ],
    },
  });
  expect(published.status, JSON.stringify(published.body)).toBe(201);
  const workerKey = (
    await h.request('POST', '/admin/v1/worker-credentials', { token: h.adminToken, body: {} })
  ).body.key;
  worker = await startTestWorker({
    baseUrl: h.url,
    workerKey,
    nodeId: 'node-approver-access',
    capabilities: [{ name: 'access.prepare', version: '1' }],
    handler: async (command, report) => {
      await gate;
      return completeWith({ ok: true })(command, report);
    },
  });
});
afterAll(async () => {
  await worker?.stop();
  await h.close();
});

const userToken = async (userId: string, roles: string[] = [], projects: string[] = []) =>
  (
    await h.request('POST', '/v1/user-tokens', {
      token: app.apiKey,
      body: { userId, roles, projects },
    })
  ).body.token as string;
const listedFor = async (taskId: string, token: string) =>
  (await h.request('GET', '/v1/me/tasks', { token })).body.items.some((t: any) => t.taskId === taskId);

describe('an approver the ACL does not name', () => {
  it('sees the task once the approval waits for them, decides, and the grant is recorded', async () => {
    let release = () => {};
    gate = new Promise((resolve) => {
      release = resolve;
    });
    const created = await h.request('POST', '/v1/tasks', {
      token: app.apiKey,
      headers: { 'idempotency-key': newId() },
      body: { workflowName: 'approver-access', workflowVersion: '1', name: 'contract', ownerId: 'olga' },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const taskId = created.body.task.id as string;
    // Rex is in the ACL with more than VIEW already: the grant leaves his entry as it is.
    const granted = await h.request('POST', `/v1/tasks/${taskId}/acl`, {
      token: app.apiKey,
      body: { principalType: 'USER', principalId: 'rex', permission: 'OPERATE' },
    });
    expect(granted.status).toBe(204);
    const [rita, lena, pia, mallory] = [
      await userToken('rita'),
      await userToken('lena', ['legal']),
      await userToken('pia', [], ['p1']),
      await userToken('mallory', ['viewer']),
    ];

    // Before the approval is reached nobody but the owner and the ACL sees the task.
    for (const token of [rita, lena, pia]) expect(await listedFor(taskId, token)).toBe(false);
    release();
    await expect
      .poll(
        async () =>
          (await h.request('GET', `/v1/tasks/${taskId}`, { token: app.apiKey })).body.execution.steps.find(
            (s: any) => s.key === 'review',
          ).waitingFor?.kind ?? null,
        { timeout: 15_000 },
      )
      .toBe('approval');

    for (const token of [rita, lena, pia]) expect(await listedFor(taskId, token)).toBe(true);
    expect(await listedFor(taskId, mallory)).toBe(false);
    const sql = postgres(h.databaseUrl, { max: 1 });
    try {
      // Rex's OPERATE entry is kept as it is: the grant is VIEW only for those who saw nothing.
      expect(
        await sql`SELECT principal_type, principal_id, permission FROM task_acl
                  WHERE task_id = ${taskId} AND revoked_at IS NULL ORDER BY principal_type, principal_id`,
      ).toEqual([
        { principal_type: 'PROJECT', principal_id: 'p1', permission: 'VIEW' },
        { principal_type: 'ROLE', principal_id: 'legal', permission: 'VIEW' },
        { principal_type: 'USER', principal_id: 'rex', permission: 'OPERATE' },
        { principal_type: 'USER', principal_id: 'rita', permission: 'VIEW' },
      ]);
    } finally {
      await sql.end();
    }

    // Recorded: the waiting fact names whom it gave access, the timeline says it in words.
    const events = (await h.request('GET', `/v1/tasks/${taskId}/events`, { token: app.apiKey })).body.items;
    const waitingFact = events.find((e: any) => e.eventType === 'STEP_WAITING' && e.stepId === 'review');
    expect(waitingFact.payload.accessGranted).toEqual([
      { principalType: 'USER', principalId: 'rita', permission: 'VIEW' },
      { principalType: 'ROLE', principalId: 'legal', permission: 'VIEW' },
      { principalType: 'PROJECT', principalId: 'p1', permission: 'VIEW' },
    ]);
    const timeline = (await h.request('GET', `/v1/tasks/${taskId}/timeline`, { token: app.apiKey })).body
      .items;
    expect(timeline.find((m: any) => m.kind === 'WAITING_FOR_APPROVAL').message).toContain(
      'user rita, role legal, project p1 may now see the task',
    );

    const approved = await h.request('POST', `/v1/tasks/${taskId}/steps/review:approve`, {
      token: rita,
      headers: { 'idempotency-key': newId() },
      body: {},
    });
    expect([approved.status, approved.body.outcome]).toEqual([201, 'APPROVED']);
  }, 60_000);
});

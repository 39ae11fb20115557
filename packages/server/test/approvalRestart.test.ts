/**
 * An approval pending across a crash: `tdp server` is SIGKILLed while an approval step waits (one of its
 * two approvals already given), started again on the same database, and the second approval after the
 * restart ends the task — no decision and no waiting state was lost.
 */
import { newId } from '@tdp/protocol';
import { describe, expect, it } from 'vitest';
import { createTestDatabase } from '../../../test/database.ts';
import { tdpProcess } from '../../../test/tdpProcess.ts';
import { completeWith, startTestWorker } from '../../../test/testWorker.ts';
import { freePort } from '../../cli/src/embeddedPostgres.ts';

describe('an approval across a server crash', () => {
  it('keeps its decisions and its wait through SIGKILL; the approval after the restart ends the task', async () => {
    const database = await createTestDatabase();
    const tdp = tdpProcess({ databaseUrl: database.url, port: await freePort() });
    const call = async (method: string, path: string, token: string, body?: unknown, key?: string) => {
      const response = await fetch(`${tdp.url}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${token}`,
          ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
          ...(key ? { 'idempotency-key': key } : {}),
        },
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      });
      return { status: response.status, body: (await response.json().catch(() => null)) as any };
    };
    let worker: Awaited<ReturnType<typeof startTestWorker>> | null = null;
    try {
      await tdp.start();
      const tenant = await call('POST', '/admin/v1/tenants', tdp.adminToken, { name: 'crash-tenant' });
      const app = await call('POST', `/admin/v1/tenants/${tenant.body.id}/applications`, tdp.adminToken, {
        name: 'crash-app',
      });
      const apiKey = app.body.apiKey.key as string;
      const workerKey = (await call('POST', '/admin/v1/worker-credentials', tdp.adminToken, {})).body.key;
      const published = await call('POST', '/v1/workflow-definitions', apiKey, {
        name: 'crash-review',
        version: '1',
        steps: [
          { key: 'prepare', capability: 'crash.prepare', capabilityVersion: '1' },
          {
            key: 'review',
            kind: 'approval',
            dependsOn: ['prepare'],
            approval: { approvers: { users: ['rita', 'rex'] }, required: 2 },
          },
        ],
      });
      expect(published.status, JSON.stringify(published.body)).toBe(201);
      worker = await startTestWorker({
        baseUrl: tdp.url,
        workerKey,
        nodeId: 'node-crash',
        capabilities: [{ name: 'crash.prepare', version: '1' }],
        handler: completeWith({ ok: true }),
      });
      const created = await call(
        'POST',
        '/v1/tasks',
        apiKey,
        {
          workflowName: 'crash-review',
          workflowVersion: '1',
          name: 'crash order',
          input: {},
          ownerId: 'olga',
        },
        newId(),
      );
      const taskId = created.body.task.id as string;
      for (const user of ['rita', 'rex'])
        await call('POST', `/v1/tasks/${taskId}/acl`, apiKey, { principalType: 'USER', principalId: user });
      const review = async () =>
        (await call('GET', `/v1/tasks/${taskId}`, apiKey)).body.execution.steps.find(
          (s: any) => s.key === 'review',
        );
      await expect
        .poll(async () => (await review()).waitingFor?.kind ?? null, { timeout: 20_000 })
        .toBe('approval');
      await worker.stop();
      worker = null;

      const tokenOf = async (userId: string) =>
        (await call('POST', '/v1/user-tokens', apiKey, { userId, ttlSeconds: 3600 })).body.token as string;
      const rita = await tokenOf('rita');
      const ritaKey = newId();
      const first = await call('POST', `/v1/tasks/${taskId}/steps/review:approve`, rita, {}, ritaKey);
      expect([first.status, first.body.outcome]).toEqual([201, 'PENDING']);

      await tdp.kill('SIGKILL');
      await tdp.start();

      // After the restart: still waiting, with rita's decision; her retry gets its first answer.
      const afterRestart = await review();
      expect(afterRestart.status).toBe('RUNNING');
      expect(afterRestart.waitingFor.decisions.map((d: any) => d.decidedBy)).toEqual(['user:rita']);
      const replay = await call('POST', `/v1/tasks/${taskId}/steps/review:approve`, rita, {}, ritaKey);
      expect([replay.status, replay.body]).toEqual([200, first.body]);

      const second = await call(
        'POST',
        `/v1/tasks/${taskId}/steps/review:approve`,
        await tokenOf('rex'),
        {},
        newId(),
      );
      expect([second.status, second.body.outcome]).toEqual([201, 'APPROVED']);
      await expect
        .poll(async () => (await call('GET', `/v1/tasks/${taskId}`, apiKey)).body.task.lifecycleStatus, {
          timeout: 20_000,
        })
        .toBe('SUCCEEDED');
      expect((await review()).data.decisions.map((d: any) => d.decidedBy)).toEqual(['user:rita', 'user:rex']);
    } finally {
      await worker?.stop();
      await tdp.kill();
      await database.drop();
    }
  }, 120_000);
});

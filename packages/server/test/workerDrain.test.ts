/**
 * The operator's drain as the server keeps it: the session stays DRAINING whatever a later heartbeat
 * says (a beat the worker sent before it heard of the drain must not make it placeable again), and its
 * DRAIN command is on its stream, and no placement puts work on it from an older view of the workers.
 * A repeated drain answers the same and writes nothing. The end-to-end drain of a real worker is packages/worker/test/operatorDrain.test.ts.
 */
import { newId } from '@tdp/protocol';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { type Harness, startHarness } from '../../../test/harness.ts';
import { PostgresFactStore } from '../src/adapters/outbound/postgres/factStore.ts';
import { connectDatabase } from '../src/main.ts';

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(() => h.close());

it('a heartbeat saying READY after an operator drain leaves the session DRAINING', async () => {
  const key = (await h.request('POST', '/admin/v1/worker-credentials', { token: h.adminToken, body: {} }))
    .body.key as string;
  const registered = await h.request('POST', '/v1/workers/register', {
    token: key,
    body: {
      instanceId: newId(),
      name: 'beating',
      nodeId: 'node-beating',
      capabilities: [{ name: 'test.echo', version: '1' }],
    },
  });
  expect(registered.status).toBe(201);
  const workerId = registered.body.workerId as string;
  const state = async () =>
    ((await h.request('GET', '/v1/workers', { token: h.adminToken })).body as Record<string, unknown>[]).find(
      (s) => s.id === workerId,
    )?.runtimeState;

  const drained = await h.request('POST', `/admin/v1/workers/${workerId}:drain`, {
    token: h.adminToken,
    body: { reason: 'moving the node' },
  });
  expect(drained.status).toBe(202);
  expect(await state()).toBe('DRAINING');

  const beat = await h.request('POST', `/v1/workers/${workerId}/heartbeat`, {
    token: key,
    body: { runtimeState: 'READY' },
  });
  expect(beat.status).toBe(204);
  expect(await state()).toBe('DRAINING');

  // Draining it again is idempotent: the same answer, and no second command or audit record.
  const again = await h.request('POST', `/admin/v1/workers/${workerId}:drain`, {
    token: h.adminToken,
    body: { reason: 'still moving' },
  });
  expect(again.status).toBe(202);
  expect(again.body).toEqual(drained.body);
  const sql = connectDatabase({ url: h.databaseUrl, maxConnections: 1 });
  try {
    expect(await sql`SELECT id FROM worker_command WHERE worker_id = ${workerId} AND type = 'DRAIN'`).toEqual(
      [{ id: drained.body.commandId }],
    );
    expect(await sql`SELECT id, reason FROM operator_audit WHERE subject_id = ${workerId}`).toEqual([
      { id: drained.body.auditId, reason: 'moving the node' },
    ]);
  } finally {
    await sql.end();
  }
});

it("placement's capacity lock leaves out a worker that drained or ended since its candidates were read", async () => {
  const key = (await h.request('POST', '/admin/v1/worker-credentials', { token: h.adminToken, body: {} }))
    .body.key as string;
  const register = async (name: string) =>
    (
      await h.request('POST', '/v1/workers/register', {
        token: key,
        body: {
          instanceId: newId(),
          name,
          nodeId: `node-${name}`,
          capabilities: [{ name: 'test.echo', version: '1' }],
        },
      })
    ).body.workerId as string;
  const [ready, draining, ended] = [
    await register('ready'),
    await register('draining'),
    await register('ended'),
  ];
  // Another replica's snapshot may still list both as ready: the placing transaction reads them again.
  await h.request('POST', `/v1/workers/${draining}/heartbeat`, {
    token: key,
    body: { runtimeState: 'DRAINING' },
  });
  const sql = connectDatabase({ url: h.databaseUrl, maxConnections: 2 });
  try {
    await sql`UPDATE worker SET ended_at = now() WHERE id = ${ended}`;
    const store = new PostgresFactStore(sql);
    const loads = await store.transaction((tx) => tx.lockWorkerCapacity([ready, draining, ended], 'all'));
    expect([...loads.keys()]).toEqual([ready]);
    expect(loads.get(ready)).toEqual({ running: 0, byCapability: {} });
  } finally {
    await sql.end();
  }
});

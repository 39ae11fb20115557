/**
 * A heartbeat says whether it changed the worker's runtime state: only a change (READY → DRAINING and
 * back) re-reads the placement candidates and retries the steps waiting for a worker; the worker runtime
 * sends its state on every beat, and re-reading on each of them would cost a query per beat per worker.
 */
import { newId } from '@tdp/protocol';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Harness, startHarness } from '../../../test/harness.ts';
import { PostgresWorkerStore } from '../src/adapters/outbound/postgres/workerStore.ts';

let h: Harness;
let workerKey: string;

beforeAll(async () => {
  h = await startHarness({ runLoops: false });
  workerKey = (await h.request('POST', '/admin/v1/worker-credentials', { token: h.adminToken, body: {} }))
    .body.key;
});
afterAll(() => h?.close());

describe('a worker registration without a limit', () => {
  it('gets the default number of attempts at once (the runtime default, 10)', async () => {
    const registered = await h.request('POST', '/v1/workers/register', {
      token: workerKey,
      body: {
        instanceId: newId(),
        name: 'unlimited',
        nodeId: 'node-unlimited',
        capabilities: [{ name: 'unlimited.op', version: '1' }],
      },
    });
    expect(registered.status).toBe(201);
    // The operator's view: no tenant's workflow runs this capability, so no application sees the worker.
    const listed = (await h.request('GET', '/v1/workers', { token: h.adminToken })).body as {
      id: string;
      maxConcurrency: number;
    }[];
    expect(listed.find((w) => w.id === registered.body.workerId)?.maxConcurrency).toBe(10);
  });
});

describe('a worker heartbeat', () => {
  it('reports a change of runtime state, and only a change', async () => {
    const registered = await h.request('POST', '/v1/workers/register', {
      token: workerKey,
      body: {
        instanceId: newId(),
        name: 'beating',
        nodeId: 'node-beating',
        capabilities: [{ name: 'beating.op', version: '1' }],
      },
    });
    const id = registered.body.workerId as string;
    const store = new PostgresWorkerStore(h.server.sql);
    const at = new Date();
    expect(await store.heartbeat(id, at, 'READY')).toEqual({ live: true, stateChanged: false });
    expect(await store.heartbeat(id, at, null)).toEqual({ live: true, stateChanged: false });
    expect(await store.heartbeat(id, at, 'DRAINING')).toEqual({ live: true, stateChanged: true });
    expect(await store.heartbeat(id, at, 'DRAINING')).toEqual({ live: true, stateChanged: false });
    expect(await store.heartbeat(id, at, 'READY')).toEqual({ live: true, stateChanged: true });
    await store.endWorker(id, at);
    expect(await store.heartbeat(id, at, 'READY')).toEqual({ live: false, stateChanged: false });
    expect(await store.heartbeat(newId(), at, 'READY')).toEqual({ live: false, stateChanged: false });
  });
});

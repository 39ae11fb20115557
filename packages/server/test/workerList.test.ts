/**
 * `GET /v1/workers` (issue 38): the fleet is the operator's. An application's key lists only the workers
 * that serve its tenant — those offering a capability, at the version, that a step of one of the tenant's
 * published workflows runs (a map step's too) — and the admin token lists every live session.
 */
import { newId } from '@tdp/protocol';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { type Harness, startHarness } from '../../../test/harness.ts';

let h: Harness;

beforeAll(async () => {
  h = await startHarness({ runLoops: false });
});
afterAll(() => h?.close());

it("shows an application only its tenant's workers, and the operator the whole fleet", async () => {
  const workerKey = (
    await h.request('POST', '/admin/v1/worker-credentials', { token: h.adminToken, body: {} })
  ).body.key;
  const register = async (name: string, capabilities: { name: string; version: string }[]) => {
    const registered = await h.request('POST', '/v1/workers/register', {
      token: workerKey,
      body: { instanceId: newId(), name, nodeId: `node-${name}`, capabilities },
    });
    expect(registered.status, JSON.stringify(registered.body)).toBe(201);
    return registered.body.workerId as string;
  };
  const publish = async (apiKey: string, name: string, steps: Record<string, unknown>[]) => {
    const published = await h.request('POST', '/v1/workflow-definitions', {
      token: apiKey,
      body: { name, version: '1', steps },
    });
    expect(published.status, JSON.stringify(published.body)).toBe(201);
  };

  const a = await h.createApplication();
  const aSibling = await h.createApplicationIn(a.tenantId);
  const b = await h.createApplication();
  const empty = await h.createApplication();
  await publish(a.apiKey, 'a', [{ key: 'one', capability: 'list.a', capabilityVersion: '1' }]);
  await publish(b.apiKey, 'b', [
    {
      key: 'items',
      kind: 'map',
      map: { items: '$.input.items', capability: 'list.b', capabilityVersion: '1' },
    },
  ]);

  const forA = await register('for-a', [{ name: 'list.a', version: '1' }]);
  const forB = await register('for-b', [{ name: 'list.b', version: '1' }]);
  const forBoth = await register('for-both', [
    { name: 'list.a', version: '1' },
    { name: 'list.b', version: '1' },
  ]);
  const otherVersion = await register('other-version', [{ name: 'list.a', version: '2' }]);
  const forNobody = await register('for-nobody', [{ name: 'list.none', version: '1' }]);

  const listed = async (token: string) => {
    const response = await h.request('GET', '/v1/workers', { token });
    expect(response.status).toBe(200);
    return (response.body as { id: string }[]).map((w) => w.id).sort();
  };
  expect(await listed(a.apiKey)).toEqual([forA, forBoth].sort());
  // Workflows are the tenant's: every application of it sees the same workers.
  expect(await listed(aSibling.apiKey)).toEqual([forA, forBoth].sort());
  expect(await listed(b.apiKey)).toEqual([forB, forBoth].sort());
  expect(await listed(empty.apiKey)).toEqual([]);
  expect(await listed(h.adminToken)).toEqual(
    expect.arrayContaining([forA, forB, forBoth, otherVersion, forNobody]),
  );
  expect((await h.request('GET', '/v1/workers', { token: 'tdp_not_a_key' })).status).toBe(401);
});

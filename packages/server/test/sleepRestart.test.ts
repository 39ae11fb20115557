/**
 * A sleep is a timer row, not a promise in memory: a `tdp server` process SIGKILLed while a task sleeps
 * wakes it after its restart, once, at its time.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createTestDatabase } from '../../../test/database.ts';
import { type TdpProcess, tdpProcess } from '../../../test/tdpProcess.ts';
import { freePort } from '../../cli/src/embeddedPostgres.ts';

let database: { url: string; drop(): Promise<void> };
let tdp: TdpProcess;

beforeAll(async () => {
  database = await createTestDatabase();
  tdp = tdpProcess({ databaseUrl: database.url, port: await freePort() });
  await tdp.start();
}, 90_000);
afterAll(async () => {
  await tdp?.kill();
  await database?.drop();
});

it('a task sleeping when the server is SIGKILLed wakes after the restart, once', async () => {
  const apiKey = await tdp.createApplication('sleeper');
  const published = await tdp.request('POST', '/v1/workflow-definitions', {
    token: apiKey,
    body: { name: 'nap', version: '1', steps: [{ key: 'nap', kind: 'sleep', sleep: { durationMs: 2_000 } }] },
  });
  expect(published.status).toBe(201);
  const created = await tdp.request('POST', '/v1/tasks', {
    token: apiKey,
    headers: { 'idempotency-key': 'nap-1' },
    body: { workflowName: 'nap', workflowVersion: '1', name: 'nap' },
  });
  const taskId = created.body.task.id;
  const read = async () => (await tdp.request('GET', `/v1/tasks/${taskId}`, { token: apiKey })).body;
  await expect
    .poll(async () => (await read()).execution.steps[0].waitingFor?.kind, { timeout: 10_000 })
    .toBe('sleep');
  const until = new Date((await read()).execution.steps[0].waitingFor.until).getTime();

  await tdp.kill('SIGKILL');
  // Down past the sleep's end: nothing in memory could wake it.
  await new Promise((resolve) => setTimeout(resolve, Math.max(0, until - Date.now()) + 500));
  await tdp.start();

  await expect.poll(async () => (await read()).task.lifecycleStatus, { timeout: 15_000 }).toBe('SUCCEEDED');
  const task = await read();
  expect(task.execution.steps[0].data).toEqual({ sleptUntil: new Date(until).toISOString() });
  const events = await tdp.request('GET', `/v1/tasks/${taskId}/events`, { token: apiKey });
  const woke = events.body.items.filter((e: { eventType: string }) => e.eventType === 'STEP_COMPLETED');
  expect(woke).toHaveLength(1);
}, 90_000);

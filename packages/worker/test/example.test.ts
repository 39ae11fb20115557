/** The documented custom-capability example (packages/worker/examples/shout.ts, shoutWorker.ts) runs as written. */
import { spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { newId } from '@tdp/protocol';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { type Harness, startHarness } from '../../../test/harness.ts';

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ runLoops: true });
});
afterAll(() => h.close());

it('examples/shoutWorker.ts: a custom capability in runner processes, driven by a real task', async () => {
  const app = await h.createApplication();
  const workerKey = (
    await h.request('POST', '/admin/v1/worker-credentials', { token: h.adminToken, body: {} })
  ).body.key;
  await h.request('POST', '/v1/workflow-definitions', {
    token: app.apiKey,
    body: {
      name: 'shout',
      version: '1',
      steps: [
        {
          key: 'shout',
          capability: 'text.shout',
          capabilityVersion: '1',
          inputMapping: { text: '$.input.text' },
        },
      ],
    },
  });
  const child = spawn(
    process.execPath,
    [
      '--conditions=@tdp/source',
      '--import',
      'tsx',
      fileURLToPath(new URL('../examples/shoutWorker.ts', import.meta.url)),
    ],
    {
      env: {
        ...process.env,
        TDP_URL: h.url,
        TDP_WORKER_KEY: workerKey,
        TDP_WORKER_DB: join(mkdtempSync(join(tmpdir(), 'tdp-example-')), 'worker.db'),
      },
      stdio: ['ignore', 'ignore', 'inherit'],
    },
  );
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
  try {
    const taskId = (
      await h.request('POST', '/v1/tasks', {
        token: app.apiKey,
        headers: { 'idempotency-key': newId() },
        body: { workflowName: 'shout', workflowVersion: '1', name: 'shout', input: { text: 'hello' } },
      })
    ).body.task.id;
    const view = async () => (await h.request('GET', `/v1/tasks/${taskId}`, { token: app.apiKey })).body;
    await expect.poll(async () => (await view()).task.lifecycleStatus, { timeout: 20_000 }).toBe('SUCCEEDED');
    expect((await view()).execution.steps[0].data).toEqual({ shouted: 'HELLO' });
  } finally {
    child.kill('SIGTERM');
    expect(await exited).toBe(0);
  }
});

/**
 * `tdp worker` with TDP_WORKER_KEY_FILE: a key rotated without a restart. The new key is written to the
 * file, the old one revoked; the worker, refused, reads the file again and goes on with the new key.
 */
import { mkdtempSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { type Harness, startHarness } from '../../../test/harness.ts';
import { silentLogger } from '../src/index.ts';
import { startWorkerFromEnv, WorkerConfigError } from '../src/main.ts';
import { endedTask, submitTask } from './support.ts';

let h: Harness;
let app: Awaited<ReturnType<Harness['createApplication']>>;
const directory = mkdtempSync(join(tmpdir(), 'tdp-key-file-'));
const keyFile = join(directory, 'worker.key');

beforeAll(async () => {
  h = await startHarness({ runLoops: true, settings: { workerCredentialsCacheMs: 0 } });
  app = await h.createApplication();
  await h.request('POST', '/v1/workflow-definitions', {
    token: app.apiKey,
    body: {
      name: 'shout',
      version: '1',
      steps: [
        {
          key: 'only',
          capability: 'test.shout',
          capabilityVersion: '1',
          inputMapping: { text: '$.input.text', delayMs: '$.input.delayMs' },
        },
      ],
    },
  });
});
afterAll(async () => {
  await h?.close();
});

const issueKey = async () =>
  (await h.request('POST', '/admin/v1/worker-credentials', { token: h.adminToken, body: {} })).body as {
    id: string;
    key: string;
  };

async function shouted(text: string): Promise<string> {
  const view = await endedTask(h, app.apiKey, await submitTask(h, app.apiKey, 'shout', { text, delayMs: 0 }));
  expect(view.task.lifecycleStatus).toBe('SUCCEEDED');
  return view.execution.steps[0].data.shouted;
}

it('takes a rotated key from its key file without a restart', { timeout: 90_000 }, async () => {
  const env = {
    TDP_URL: h.url,
    TDP_WORKER_DB: join(directory, 'worker.db'),
    TDP_WORKER_KEY_FILE: join(directory, 'missing.key'),
  };
  const capabilities = new URL('./fixtures/capabilities.ts', import.meta.url);
  await expect(startWorkerFromEnv(env, capabilities, silentLogger)).rejects.toThrow(WorkerConfigError);

  const first = await issueKey();
  await writeFile(keyFile, `${first.key}\n`, { mode: 0o600 });
  const worker = await startWorkerFromEnv(
    { ...env, TDP_WORKER_KEY_FILE: keyFile },
    capabilities,
    silentLogger,
  );
  try {
    expect(await shouted('before')).toBe('BEFORE');
    // The rotation: the new key in the file, then the old one revoked.
    const second = await issueKey();
    await writeFile(keyFile, second.key);
    const revoked = await h.request('DELETE', `/admin/v1/worker-credentials/${first.id}`, {
      token: h.adminToken,
    });
    expect(revoked.status).toBeLessThan(300);
    // The worker goes on under the new key, with a session of its own.
    const oldSession = worker.runtime.id;
    await expect.poll(() => worker.runtime.id, { timeout: 20_000 }).not.toBe(oldSession);
    await expect.poll(() => worker.runtime.status().state, { timeout: 20_000 }).toBe('READY');
    // The revoked key's session ends when its heartbeats stop counting (docs/security.md, known limits):
    // on the test clock, once it has moved past the heartbeat TTL.
    h.clock.advance(10 * 60_000);
    expect(await shouted('after')).toBe('AFTER');
    expect(worker.runtime.status().state).toBe('READY');
  } finally {
    await worker.drain();
  }
});

/**
 * `tdp dev` is ready when it says so: a script that waits for `/readyz` and then calls the API must
 * succeed at once. At the first 200, the development key it prints works, the sample ZIPs are there and
 * the demo app answers — no retry. Before that, `/readyz` names what it still sets up.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createTestDatabase } from '../../../test/database.ts';
import { loadCredentials } from '../src/credentials.ts';
import { freePort } from '../src/embeddedPostgres.ts';

const root = new URL('../../../', import.meta.url).pathname;
const cli = join(root, 'packages/cli/src/main.ts');

describe('tdp dev readiness', () => {
  let folder: string | undefined;
  let database: Awaited<ReturnType<typeof createTestDatabase>> | undefined;
  let child: ChildProcess | undefined;
  let closed: Promise<void> = Promise.resolve();

  afterAll(async () => {
    if (child && child.exitCode === null && child.signalCode === null) child.kill('SIGINT');
    await closed;
    await database?.drop();
    if (folder) await rm(folder, { recursive: true, force: true });
  });

  it('answers /readyz 200 only once the printed key, the samples and the demo app work', {
    timeout: 180_000,
  }, async () => {
    folder = await mkdtemp(join(tmpdir(), 'tdp-dev-ready-'));
    database = await createTestDatabase();
    const [port, demoPort] = [await freePort(), await freePort()];
    const home = join(folder, '.tdp');
    let output = '';
    child = spawn(process.execPath, ['--conditions=@tdp/source', '--import', 'tsx', cli, 'dev'], {
      cwd: root,
      env: {
        ...process.env,
        TDP_HOME: home,
        TDP_PORT: String(port),
        TDP_DEMO_PORT: String(demoPort),
        DATABASE_URL: database.url,
        NATS_URL: '',
        REDIS_URL: '',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout!.on('data', (chunk: Buffer) => (output += chunk));
    child.stderr!.on('data', (chunk: Buffer) => (output += chunk));
    const running = child;
    closed = new Promise((resolve) => running.once('close', () => resolve()));

    // Poll as a script would; keep what the not-ready answers said.
    const base = `http://127.0.0.1:${port}`;
    const waitingFor = new Set<string>();
    const deadline = Date.now() + 150_000;
    for (;;) {
      if (running.exitCode !== null) throw new Error(`tdp dev exited early:\n${output}`);
      if (Date.now() > deadline) throw new Error(`tdp dev never became ready:\n${output}`);
      const answer = await fetch(`${base}/readyz`).catch(() => null);
      if (answer?.status === 200) break;
      if (answer?.status === 503) {
        const { checks } = (await answer.json()) as { checks: Record<string, string> };
        if (checks.development) waitingFor.add(checks.development);
      }
      await new Promise((resolve) => setTimeout(resolve, 25));
    }

    // The first 200: everything the banner promises works now.
    const apiKey = (await loadCredentials(home))?.apiKey;
    expect(apiKey, output).toMatch(/^tdp_/);
    const tasks = await fetch(`${base}/v1/tasks`, { headers: { authorization: `Bearer ${apiKey}` } });
    expect(tasks.status, await tasks.clone().text()).toBe(200);
    for (const sample of ['holiday-photos.zip', 'broken.zip'])
      expect((await stat(join(home, 'samples', sample))).size, sample).toBeGreaterThan(0);
    expect((await fetch(`http://127.0.0.1:${demoPort}/`)).status).toBe(200);

    // It said what it waited for, and the key it works with is the one it prints.
    expect([...waitingFor]).toEqual(['setting up the development key, sample ZIPs and demo app']);
    await expect.poll(() => output, { timeout: 10_000 }).toContain('Press Ctrl-C to stop.');
    expect(output).toContain(`API key       ${apiKey}`);
    expect(output).toContain(`Demo app      http://127.0.0.1:${demoPort}`);
  });
});

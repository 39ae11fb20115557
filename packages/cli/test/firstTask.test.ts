/**
 * The README's "Your first task", run as written: its `sh` block (the curl version) is taken from
 * README.md and executed with `sh` from a folder whose `.tdp` is the home of a real `tdp dev` process —
 * the development application reads and writes files through the development resource provider with no
 * setup. The only thing the test changes is the port, through the TDP_PORT the block itself honours.
 * It must end SUCCEEDED and download a real ZIP: the junk gone, every photo watermarked.
 */
import { spawn } from 'node:child_process';
import { copyFile, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { unfitForPeople } from '@tdp/protocol';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase } from '../../../test/database.ts';
import { type DevProcess, startDevProcess } from '../../../test/devProcess.ts';
import { readmeBlock } from '../../../test/readme.ts';
import { readZip } from '../../capabilities/test/zips.ts';
import { freePort } from '../src/embeddedPostgres.ts';

const root = new URL('../../../', import.meta.url).pathname;
const cli = join(root, 'packages/cli/src/main.ts');

function run(command: string, args: string[], options: { cwd: string; env: NodeJS.ProcessEnv }) {
  return new Promise<{ code: number | null; output: string }>((resolve) => {
    const child = spawn(command, args, { ...options, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk));
    child.once('close', (code) => resolve({ code, output }));
  });
}

describe("the README's first task", () => {
  let folder: string;
  let port: number;
  let database: Awaited<ReturnType<typeof createTestDatabase>>;
  let dev: DevProcess;

  beforeAll(async () => {
    folder = await mkdtemp(join(tmpdir(), 'tdp-first-task-'));
    database = await createTestDatabase();
    port = await freePort();
    // From the repository (where tsx resolves); its home is the folder the block runs in.
    dev = await startDevProcess(
      process.execPath,
      ['--conditions=@tdp/source', '--import', 'tsx', cli, 'dev'],
      {
        cwd: root,
        env: {
          ...process.env,
          TDP_HOME: join(folder, '.tdp'),
          TDP_PORT: String(port),
          TDP_DEMO_PORT: '0',
          DATABASE_URL: database.url,
          NATS_URL: '',
          REDIS_URL: '',
        },
        timeoutMs: 90_000,
      },
    );
  }, 120_000);

  afterAll(async () => {
    await dev?.stop();
    await database?.drop();
    await rm(folder, { recursive: true, force: true });
  });

  it('runs as written and ends SUCCEEDED with a downloaded ZIP of watermarked photos', {
    timeout: 180_000,
  }, async () => {
    expect(dev.output()).toContain(`Files         ${join(folder, '.tdp', 'files')}`);
    const block = readmeBlock('### With curl', 'sh');
    // No placeholder to edit, and the default port unless TDP_PORT says otherwise.
    expect(block).not.toMatch(/<[a-z ]+>/);
    expect(block).toMatch(/\$\{TDP_PORT:-8080\}/);

    const { code, output } = await run('sh', ['-c', block], {
      cwd: folder,
      env: { ...process.env, TDP_PORT: String(port) },
    });
    expect(code, output).toBe(0);
    const lines = output.trim().split('\n');
    expect(lines, output).toContain('SUCCEEDED');
    expect(lines.at(-1), output).toMatch(/^result\.zip \(tasks\/[0-9a-f-]{36}\/watermark\/archive\.zip\)$/);

    const result = await readZip(join(folder, 'result.zip'));
    const original = await readZip(join(folder, '.tdp', 'samples', 'holiday-photos.zip'));
    const names = [...result.keys()].filter((name) => !name.endsWith('/')).sort();
    expect(names).toEqual(['photos/beach.jpg', 'photos/mountains.jpg', 'photos/sunset.png']);
    for (const name of names) {
      const before = await sharp(original.get(name)!).raw().toBuffer({ resolveWithObject: true });
      const after = await sharp(result.get(name)!).raw().toBuffer({ resolveWithObject: true });
      expect([after.info.width, after.info.height]).toEqual([before.info.width, before.info.height]);
      // The watermark changed pixels (a real image came back, not the input).
      let changed = 0;
      for (let i = 0; i < before.data.length; i += 1) if (before.data[i] !== after.data[i]) changed += 1;
      expect(changed / before.data.length, name).toBeGreaterThan(0.001);
    }
  });

  it('ends FAILED on broken.zip (as the README says) with a reason a person can read', async () => {
    const key = JSON.parse(await readFile(join(folder, '.tdp', 'credentials.json'), 'utf8')).apiKey;
    await copyFile(
      join(folder, '.tdp', 'samples', 'broken.zip'),
      join(folder, '.tdp', 'files', 'broken.zip'),
    );
    const base = `http://127.0.0.1:${port}`;
    const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
    const created = await fetch(`${base}/v1/tasks`, {
      method: 'POST',
      headers: { ...headers, 'idempotency-key': 'broken' },
      body: JSON.stringify({
        workflowName: 'zip-clean-watermark',
        workflowVersion: '1',
        name: 'Broken',
        input: { sourceZip: 'broken.zip', watermarkText: 'x' },
      }),
    });
    const taskId = ((await created.json()) as { task: { id: string } }).task.id;
    let task: { lifecycleStatus: string; failure: { code: string; userMessage: string } | null };
    const deadline = Date.now() + 30_000;
    do {
      await new Promise((resolve) => setTimeout(resolve, 200));
      task = (
        (await (await fetch(`${base}/v1/tasks/${taskId}`, { headers })).json()) as { task: typeof task }
      ).task;
    } while (task.lifecycleStatus !== 'FAILED' && Date.now() < deadline);
    expect(task.failure?.code).toBe('ARCHIVE_INVALID');
    expect(unfitForPeople(task.failure!.userMessage)).toBeNull();
    expect(task.failure!.userMessage).toMatch(/upload it again\.$/i);
  });
});

/**
 * The Quickstart promise: `npm start` boots the whole system on embedded PostgreSQL, answers /readyz,
 * accepts a task with the printed key, shuts down cleanly on Ctrl-C, and a second start reuses the data.
 */
import { access, chmod, mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDevProcess } from '../../../test/devProcess.ts';
import { freePort } from '../src/embeddedPostgres.ts';

const root = new URL('../../../', import.meta.url).pathname;

/** `npm start` in its own process group, like a terminal: Ctrl-C goes to the group. */
const npmStart = (env: NodeJS.ProcessEnv) =>
  startDevProcess('npm', ['start'], { cwd: root, env: { ...process.env, ...env }, detached: true });

describe('npm start', () => {
  let home: string;
  let port: number;
  let pgPort: number;
  let demoPort: number;

  beforeAll(async () => {
    home = await mkdtemp(join(tmpdir(), 'tdp-home-'));
    await chmod(home, 0o755);
    port = await freePort();
    pgPort = await freePort();
    demoPort = await freePort();
  });
  afterAll(async () => {
    await rm(home, { recursive: true, force: true });
  });

  it('boots, answers /readyz, creates a task, stops cleanly, and reuses its data on the next start', {
    timeout: 240_000,
  }, async () => {
    const env = {
      TDP_HOME: home,
      TDP_PORT: String(port),
      TDP_PG_PORT: String(pgPort),
      TDP_DEMO_PORT: String(demoPort),
      DATABASE_URL: '',
      NATS_URL: '',
    };
    const first = await npmStart(env);
    const apiKey = /API key\s+(tdp_\S+)/.exec(first.output())![1]!;
    expect(first.output()).toContain(`http://127.0.0.1:${port}/docs`);
    // The dev worker registered with the built-in capabilities.
    expect(first.output()).toMatch(/Worker\s+[0-9a-f-]{36} \(archive\.clean@1, image\.watermark@1\)/);
    expect(first.output()).toContain(
      `Sample ZIPs   ${join(home, 'samples')} (holiday-photos.zip, broken.zip)`,
    );
    await access(join(home, 'samples', 'holiday-photos.zip'));
    const credentials = JSON.parse(await readFile(join(home, 'credentials.json'), 'utf8'));
    expect(credentials.apiKey).toBe(apiKey);
    // Local files are the user's alone: the credentials, the worker's database (execution tokens, every
    // tenant's inputs), the files folder.
    const modeOf = async (path: string) => ((await stat(path)).mode & 0o777).toString(8);
    for (const file of ['credentials.json', 'worker.db', 'worker.db-wal', 'worker.db-shm'])
      expect(await modeOf(join(home, file)), file).toBe('600');
    expect(await modeOf(join(home, 'files'))).toBe('700');
    // The embedded PostgreSQL asks for the password credentials.json keeps; without it, nothing.
    const asPostgres = async (password: string) => {
      const sql = postgres(`postgres://postgres:${password}@127.0.0.1:${pgPort}/tdp`, {
        max: 1,
        onnotice: () => {},
      });
      try {
        return (await sql`SELECT 1 AS one`)[0]?.one === 1;
      } catch {
        return false;
      } finally {
        await sql.end({ timeout: 1 });
      }
    };
    expect(credentials.postgresPassword).toMatch(/^[\w-]{32}$/);
    expect([await asPostgres(credentials.postgresPassword), await asPostgres('')]).toEqual([true, false]);
    // The demo app: its page, with its own TDP application remembered for the next start.
    const demo = `http://127.0.0.1:${demoPort}`;
    expect(first.output()).toContain(`Demo app      ${demo}`);
    const page = await fetch(demo);
    expect([page.status, await page.text()]).toEqual([200, expect.stringContaining('ZIP cleaner')]);
    expect(credentials.demo.applicationId).not.toBe(credentials.applicationId);

    const base = `http://127.0.0.1:${port}`;
    expect((await fetch(`${base}/readyz`)).status).toBe(200);
    // The development admin: how to sign in is printed, and it signs in.
    const signIn = /^ {16}Sign in as dev@localhost with password (\S+)$/m.exec(first.output());
    expect(signIn, first.output()).toBeTruthy();
    const password = signIn![1]!;
    expect(credentials.operatorPassword).toBe(password);
    const login = await fetch(`${base}/dashboard/api/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: 'dev@localhost', password }),
    });
    expect([login.status, login.headers.get('set-cookie')]).toEqual([
      200,
      expect.stringContaining('HttpOnly'),
    ]);
    const headers = { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' };
    const published = await fetch(`${base}/v1/workflow-definitions`, {
      method: 'POST',
      headers,
      body: JSON.stringify({
        name: 'smoke',
        version: '1',
        steps: [{ key: 'clean', capability: 'archive.clean', capabilityVersion: '1' }],
      }),
    });
    expect(published.status).toBe(201);
    const created = await fetch(`${base}/v1/tasks`, {
      method: 'POST',
      headers: { ...headers, 'idempotency-key': 'smoke-1' },
      body: JSON.stringify({ workflowName: 'smoke', workflowVersion: '1', name: 'smoke task' }),
    });
    expect(created.status).toBe(201);
    const taskId = ((await created.json()) as { task: { id: string } }).task.id;

    const printed = await first.stop();
    expect(printed).toContain('SIGINT: shutting down');
    expect(printed).toContain('TDP stopped cleanly.');
    // PostgreSQL is stopped too: its lock file is gone.
    await expect(access(join(home, 'postgres', 'postmaster.pid'))).rejects.toThrow();

    const second = await npmStart(env);
    try {
      expect(/API key\s+(tdp_\S+)/.exec(second.output())![1]).toBe(apiKey);
      // The same development admin and password (created once; the restart's 409 keeps it).
      expect(second.output()).toContain(`Sign in as dev@localhost with password ${password}`);
      const remembered = JSON.parse(await readFile(join(home, 'credentials.json'), 'utf8'));
      expect(remembered.demo.applicationId).toBe(credentials.demo.applicationId);
      expect((await fetch(`http://127.0.0.1:${demoPort}/api/orders`)).status).toBe(200);
      const read = await fetch(`${base}/v1/tasks/${taskId}`, { headers });
      expect(read.status).toBe(200);
    } finally {
      expect(await second.stop()).toContain('TDP stopped cleanly.');
    }
  });
});

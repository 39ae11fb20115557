/**
 * What a developer installs to write a backend and a worker: `npm install @tdp/sdk @tdp/worker typebox`,
 * from the packed packages into an empty project. The worker is the runtime only (the built-in
 * capabilities, with sharp and a CJK font, are `@tdp/capabilities`; gRPC and OpenTelemetry are optional
 * peer dependencies), so the install stays small and runs no install script but SQLite's binding.
 */
import { lstat, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { cleanEnv, localPrebuilds, lockedVersion, packPackages, run } from './packedPackages.ts';

const maxBytes = 40 * 1024 * 1024;
/** The one package whose install script runs: better-sqlite3 fetches (or builds) its native binding. */
const allowedScripts = ['better-sqlite3'];

let project: string;
let installOutput: string;

beforeAll(async () => {
  project = await mkdtemp(join(tmpdir(), 'tdp-lean-'));
  const tarballs = await packPackages(['protocol', 'egress', 'worker', 'sdk'], join(project, 'packs'));
  const manifest = {
    name: 'tdp-lean',
    private: true,
    type: 'module',
    dependencies: {
      '@tdp/sdk': tarballs['@tdp/sdk'],
      '@tdp/worker': tarballs['@tdp/worker'],
      typebox: await lockedVersion('typebox'),
    },
    // Our packages depend on each other by version: the packed ones, never a registry's. better-sqlite3
    // at the workspace's version, so that the binding prebuilt from the workspace's own build fits.
    overrides: { ...tarballs, 'better-sqlite3': await lockedVersion('better-sqlite3') },
    allowScripts: { 'better-sqlite3': true },
  };
  await writeFile(join(project, 'package.json'), JSON.stringify(manifest, null, 2));
  const started = performance.now();
  const { stdout, stderr } = await run('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund'], {
    cwd: project,
    env: cleanEnv({ npm_config_better_sqlite3_local_prebuilds: await localPrebuilds(project) }),
  });
  installOutput = `${stdout}\n${stderr}`;
  const seconds = (performance.now() - started) / 1000;
  const bytes = await sizeOf(join(project, 'node_modules'));
  process.stdout.write(
    `npm install @tdp/sdk @tdp/worker typebox: ${(bytes / 1024 / 1024).toFixed(1)} MB of node_modules, ` +
      `installed in ${seconds.toFixed(1)} s\n`,
  );
}, 600_000);

afterAll(async () => {
  if (project) await rm(project, { recursive: true, force: true });
});

it('node_modules holds at most 40 MB', async () => {
  expect(await sizeOf(join(project, 'node_modules'))).toBeLessThanOrEqual(maxBytes);
});

it('no package but better-sqlite3 runs an install script, and npm warns of none', async () => {
  const withScripts: string[] = [];
  for (const folder of await packageFolders(join(project, 'node_modules'))) {
    const manifest = JSON.parse(await readFile(join(folder, 'package.json'), 'utf8'));
    const scripts = manifest.scripts ?? {};
    // npm runs `node-gyp rebuild` for a package with a binding.gyp and no install script of its own.
    const gyp = !scripts.install && !scripts.preinstall && (await exists(join(folder, 'binding.gyp')));
    if (scripts.install || scripts.preinstall || scripts.postinstall || gyp) withScripts.push(manifest.name);
  }
  expect(withScripts.sort()).toEqual(allowedScripts);
  // The README's `allowScripts` line covers what remains: npm names no package whose scripts it held back.
  expect(installOutput).not.toMatch(/install-scripts/);
});

it('the heavy packages are not installed, and a setting that needs one says which to install', async () => {
  for (const heavy of [
    'sharp',
    '@grpc/grpc-js',
    '@opentelemetry/api',
    '@expo-google-fonts/noto-sans-sc',
    'yazl',
  ])
    expect(await exists(join(project, 'node_modules', heavy)), heavy).toBe(false);
  await writeFile(
    join(project, 'start.mjs'),
    `import { defineCapability, startWorker } from '@tdp/worker';
import { Type } from 'typebox';
const echo = defineCapability({ name: 'echo', version: '1', input: Type.Object({}), output: Type.Object({}), run: async () => ({}) });
try {
  await startWorker({ url: 'http://127.0.0.1:9', key: 'tdpw_lean', capabilities: [echo], handleSignals: false,
    database: 'worker.db', ...(process.argv[2] === 'grpc' ? { transport: 'grpc' } : {}) });
  console.log(JSON.stringify({ started: true }));
} catch (error) {
  console.log(JSON.stringify({ name: error.name, message: error.message }));
}
process.exit(0);
`,
  );
  const attempt = async (args: string[], env: Record<string, string> = {}) =>
    JSON.parse(
      (await run(process.execPath, ['start.mjs', ...args], { cwd: project, env: cleanEnv(env) })).stdout,
    );
  expect(await attempt(['grpc'])).toEqual({
    name: 'WorkerConfigError',
    message: expect.stringContaining('npm install @grpc/grpc-js @grpc/proto-loader'),
  });
  expect(await attempt([], { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318' })).toEqual({
    name: 'WorkerConfigError',
    message: expect.stringContaining('npm install @opentelemetry/api @opentelemetry/core'),
  });
});

const exists = (path: string) =>
  lstat(path).then(
    () => true,
    () => false,
  );

/** Every installed package's folder, nested node_modules included. */
async function packageFolders(nodeModules: string): Promise<string[]> {
  const folders: string[] = [];
  for (const entry of await readdir(nodeModules, { withFileTypes: true }).catch(() => [])) {
    if (!entry.isDirectory() || entry.name.startsWith('.')) continue;
    const path = join(nodeModules, entry.name);
    const inScope = entry.name.startsWith('@')
      ? (await readdir(path, { withFileTypes: true }))
          .filter((e) => e.isDirectory())
          .map((e) => join(path, e.name))
      : [path];
    for (const folder of inScope) {
      if (await exists(join(folder, 'package.json'))) folders.push(folder);
      folders.push(...(await packageFolders(join(folder, 'node_modules'))));
    }
  }
  return folders;
}

/** The bytes of the files under `path` (as `du --apparent-size`; links are not followed). */
async function sizeOf(path: string): Promise<number> {
  const stat = await lstat(path);
  if (!stat.isDirectory()) return stat.size;
  let total = 0;
  for (const name of await readdir(path)) total += await sizeOf(join(path, name));
  return total;
}

/**
 * Installing TDP's packages as another project would: packed with `npm pack` (which builds them) and
 * installed with npm from the tarballs into a folder outside the workspace.
 */
import { execFile } from 'node:child_process';
import { mkdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';

const execFileAsync = promisify(execFile);
export const workspaceRoot = new URL('../../../', import.meta.url).pathname;

/** Runs a command; its failure carries what it printed (npm prints its errors on stdout). */
export async function run(
  command: string,
  args: string[],
  options: { cwd: string; env: Record<string, string> },
) {
  try {
    return await execFileAsync(command, args, { ...options, maxBuffer: 64 * 1024 * 1024 });
  } catch (error) {
    const { stdout, stderr } = error as { stdout?: string; stderr?: string };
    throw new Error(`${command} ${args.join(' ')} failed:\n${stdout ?? ''}\n${stderr ?? ''}`);
  }
}

/** The environment without npm's own variables (a suite may run under `npm test`). */
export function cleanEnv(extra: Record<string, string> = {}): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [name, value] of Object.entries(process.env))
    if (value !== undefined && !/^npm_/i.test(name) && name !== 'NODE_OPTIONS') env[name] = value;
  return { ...env, ...extra };
}

export async function lockedVersion(name: string): Promise<string> {
  const lock = JSON.parse(await readFile(join(workspaceRoot, 'package-lock.json'), 'utf8'));
  const version = lock.packages[`node_modules/${name}`]?.version;
  if (!version) throw new Error(`${name} is not in the workspace's lock file`);
  return version as string;
}

/** Packs workspace packages (`['protocol', …]`) into `folder`; each package's name → `file:` its tarball. */
export async function packPackages(packages: string[], folder: string): Promise<Record<string, string>> {
  await mkdir(folder, { recursive: true });
  const { stdout } = await run(
    'npm',
    ['pack', '--json', ...packages.flatMap((p) => ['-w', `packages/${p}`]), '--pack-destination', folder],
    { cwd: workspaceRoot, env: cleanEnv() },
  );
  // Build output may precede the JSON on stdout.
  const packed = JSON.parse(stdout.slice(stdout.indexOf('\n[') + 1)) as { name: string; filename: string }[];
  return Object.fromEntries(packed.map((p) => [p.name, `file:${join(folder, p.filename)}`]));
}

/**
 * A folder holding better-sqlite3's prebuilt binary for this Node, made from the workspace's own build.
 * Without one, its install script downloads it from GitHub or, where GitHub is out of reach (CI), compiles
 * SQLite from source: two minutes of both cores, spent testing better-sqlite3's build rather than TDP.
 * prebuild-install reads the folder from `npm_config_<package>_local_prebuilds`, under the file name it
 * would download.
 */
export async function localPrebuilds(project: string): Promise<string> {
  const folder = join(project, 'prebuilds');
  await mkdir(folder, { recursive: true });
  const version = await lockedVersion('better-sqlite3');
  const name = `better-sqlite3-v${version}-node-v${process.versions.modules}-${process.platform}-${process.arch}.tar.gz`;
  await run('tar', ['-czf', join(folder, name), 'build/Release/better_sqlite3.node'], {
    cwd: join(workspaceRoot, 'node_modules/better-sqlite3'),
    env: cleanEnv(),
  });
  return folder;
}

/**
 * `npm run fuzz` (scripts/fuzz.sh): schemathesis against every operation of a real `tdp server` on a
 * temporary embedded PostgreSQL, with real credentials: an application API key, the admin token, a
 * registered worker's key (and its id for the /v1/workers/{id}/… paths), a user token and an execution
 * token. Checks: no 5xx, every response's status, content type and body as documented. Exits with
 * schemathesis's code. Its first argument is the Python of schemathesis's venv, which runs
 * schemathesis_cli.py (schemathesis's command line with an upstream bug worked around: see there); the
 * arguments after it go to `schemathesis run` as they are.
 */
import { spawn } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort, startTemporaryPostgres } from '../../packages/cli/src/embeddedPostgres.ts';
import { connectDatabase, migrate } from '../../packages/server/src/main.ts';
import { tdpProcess } from '../../test/tdpProcess.ts';

const configTemplate = fileURLToPath(new URL('./schemathesis.toml', import.meta.url));
const schemathesisCli = fileURLToPath(new URL('./schemathesis_cli.py', import.meta.url));

/**
 * The config file: the template, and the ids of what the seeding made, so that most requests to
 * /v1/tasks/{id}/… and /admin/v1/applications/{id}/… reach a real task or application (the others keep
 * generated ids, for the not-found and malformed paths).
 */
async function writeConfig(directory: string, ids: { taskId: string; applicationId: string }) {
  const seeded = `
[dictionaries.task]
values = ["${ids.taskId}"]

[dictionaries.application]
values = ["${ids.applicationId}"]

[[operations]]
include-path-regex = '^/v1/tasks/\\{id\\}'
parameters = { "path.id" = { dictionary = "task", probability = 0.7 } }

[[operations]]
include-path-regex = '^/v1/tasks/\\{taskId\\}'
parameters = { "path.taskId" = { dictionary = "task", probability = 0.7 } }

[[operations]]
include-path-regex = '^/admin/v1/applications/\\{id\\}'
parameters = { "path.id" = { dictionary = "application", probability = 0.7 } }
`;
  const file = join(directory, 'schemathesis.toml');
  await writeFile(file, `${await readFile(configTemplate, 'utf8')}${seeded}`);
  return file;
}

async function call(url: string, token: string, method: string, path: string, body?: unknown) {
  const response = await fetch(`${url}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${token}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await response.text();
  if (!response.ok) throw new Error(`seeding: ${method} ${path} answered ${response.status} ${text}`);
  return text ? JSON.parse(text) : null;
}

/** The credentials every security scheme of /openapi.json needs, made through the API itself. */
async function seedCredentials(
  url: string,
  adminToken: string,
): Promise<{ env: Record<string, string>; taskId: string; applicationId: string }> {
  const tenant = await call(url, adminToken, 'POST', '/admin/v1/tenants', { name: 'fuzz' });
  const tenantId = tenant.id ?? tenant.tenant?.id;
  const created = await call(url, adminToken, 'POST', `/admin/v1/tenants/${tenantId}/applications`, {
    name: 'fuzz-app',
  });
  const apiKey: string = created.apiKey.key;
  const applicationId: string = created.application.id;
  const { key: workerKey } = await call(url, adminToken, 'POST', '/admin/v1/worker-credentials', {
    label: 'fuzz',
  });
  const { workerId } = await call(url, workerKey, 'POST', '/v1/workers/register', {
    instanceId: 'fuzz-instance',
    name: 'fuzz worker',
    nodeId: 'fuzz-node',
    capabilities: [{ name: 'fuzz.noop', version: '1' }],
  });
  const workflow = await call(url, apiKey, 'POST', '/v1/workflows', {
    clientWorkflowKey: 'fuzz-workflow',
    ownerId: 'fuzz-user',
    title: 'A workflow for the fuzzer',
    initialTasks: [
      {
        clientTaskKey: 'fuzz-task',
        title: 'A task for the fuzzer',
        knownSteps: [{ stepId: 'prepare', operationCode: 'FUZZ.PREPARE', expectedProducer: 'fuzz' }],
      },
    ],
  });
  const taskId: string = workflow.tasks[0].taskId;
  const execution = await call(url, apiKey, 'POST', `/v1/tasks/${taskId}/steps/prepare:activate`);
  const { token: userToken } = await call(url, apiKey, 'POST', '/v1/user-tokens', {
    userId: 'fuzz-user',
    ttlSeconds: 86_400,
  });
  const env = {
    TDP_FUZZ_ADMIN_TOKEN: adminToken,
    TDP_FUZZ_API_KEY: apiKey,
    TDP_FUZZ_WORKER_KEY: workerKey,
    TDP_FUZZ_WORKER_ID: workerId,
    TDP_FUZZ_USER_TOKEN: userToken,
    TDP_FUZZ_EXECUTION_TOKEN: execution.executionToken,
  };
  return { env, taskId, applicationId };
}

async function main(python: string, extraArgs: string[]): Promise<number> {
  const postgres = await startTemporaryPostgres();
  const directory = await mkdtemp(join(tmpdir(), 'tdp-fuzz-'));
  let server: ReturnType<typeof tdpProcess> | null = null;
  try {
    const admin = connectDatabase({ url: postgres.adminUrl, maxConnections: 1 });
    await admin.unsafe('CREATE DATABASE tdp_fuzz').finally(() => admin.end());
    const databaseUrl = postgres.urlFor('tdp_fuzz');
    const sql = connectDatabase({ url: databaseUrl, maxConnections: 1 });
    await migrate(sql).finally(() => sql.end());

    // Errors only: a 5xx the fuzzer finds is logged with its stack next to schemathesis's report.
    server = tdpProcess({
      databaseUrl,
      port: await freePort(),
      env: { TDP_LOG_LEVEL: 'error' },
      showLogs: true,
    });
    await server.start();
    const { env, ...ids } = await seedCredentials(server.url, server.adminToken);
    const configFile = await writeConfig(directory, ids);
    // Kept after the run (the temporary directory is not): the full report, for a look after CI.
    const reportFile = join(tmpdir(), 'tdp-fuzz-report.txt');
    const run = () =>
      runSchemathesis(
        python,
        [schemathesisCli, '--config-file', configFile, 'run', `${server!.url}/openapi.json`, ...extraArgs],
        { ...process.env, ...env },
        reportFile,
      );
    process.stdout.write(`fuzzing ${server.url}/openapi.json\n`);
    const first = await run();
    if (first.code === 0 || !onlyToolErrors(first.output)) return first.code;
    // Schemathesis itself crashed (an internal "Runtime Error" while generating cases, no check failed):
    // that says nothing about the API, so the run is made once more; a failed check is never retried.
    process.stdout.write('\nfuzz: schemathesis failed on its own (no check failed); running it once more\n');
    return (await run()).code;
  } finally {
    await server?.kill('SIGTERM');
    await postgres.stop();
    await rm(directory, { recursive: true, force: true });
  }
}

/**
 * Runs schemathesis with its report written to `reportFile`, not to the terminal: its live progress is
 * thousands of redrawn lines, and its closing banner is pytest's ("=== 2 warnings in 178s ==="), which log
 * readers take for a test run that ran nothing. What is printed instead is `summarise`'s few lines, and
 * the report itself when the run failed.
 */
async function runSchemathesis(
  python: string,
  args: string[],
  env: NodeJS.ProcessEnv,
  reportFile: string,
): Promise<{ code: number; output: string }> {
  const child = spawn(python, args, {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...env, NO_COLOR: '1' },
  });
  let output = '';
  const keep = (chunk: Buffer) => {
    output += chunk.toString('utf8');
  };
  child.stdout.on('data', keep);
  child.stderr.on('data', keep);
  const code = await new Promise<number>((resolve) => child.once('close', (exit) => resolve(exit ?? 1)));
  const report = withoutProgress(output);
  await writeFile(reportFile, report);
  process.stdout.write(`${summarise(report, code)}\n  report: ${reportFile}\n`);
  if (code !== 0) process.stdout.write(`\n${report}\n`);
  // The report, not the raw output: terminal sequences in the raw one can split the words looked for.
  return { code, output: report };
}

/** The report without terminal control sequences and without the progress frames it redrew. */
function withoutProgress(output: string): string {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: terminal control sequences are what is removed
  const plain = output.replace(/\u001b\[[0-9;?]*[A-Za-z]/g, '');
  const lines = plain
    .split(/\r?\n/)
    // Progress frames: a phase's counters (emoji first) and the stateful phase's timer ("0:03…  14 scenarios").
    .filter(
      (line) =>
        !/^\s*(✅|⏭|❌|🚫|🕐|🕑|🕒|🕓|🕔|🕕|🕖|🕗|🕘|🕙|🕚|🕛)/u.test(line) && !/^\s*\d+:\d\d…/u.test(line),
    );
  return lines.join('\n').replace(/\n{3,}/g, '\n\n');
}

/** One plain line: how many operations and cases, and whether any check failed. */
function summarise(report: string, code: number): string {
  const tested = /Tested:\s*(\d+)/.exec(report)?.[1];
  const selected = /Selected:\s*(\d+\/\d+)/.exec(report)?.[1];
  const cases = /Test cases:\s*\n\s*(\d+) generated/.exec(report)?.[1];
  const seed = /Seed:\s*(\d+)/.exec(report)?.[1];
  const outcome = code === 0 ? 'no check failed' : `schemathesis exited with ${code}`;
  return [
    `fuzz: ${outcome};`,
    `operations ${tested ?? '?'} tested of ${selected ?? '?'} selected;`,
    `${cases ?? '?'} cases generated;`,
    `seed ${seed ?? '?'}`,
  ].join(' ');
}

/** The run failed only by schemathesis's own errors: no check failed (no FAILURES section). */
function onlyToolErrors(output: string): boolean {
  return /Runtime Error/.test(output) && !/FAILURES|Failures:/.test(output);
}

const [python, ...rest] = process.argv.slice(2);
if (!python) {
  process.stderr.write("usage: run.ts <the Python of schemathesis's venv> [schemathesis run options]\n");
  process.exit(2);
}
main(python, rest).then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(`fuzz: ${(error as Error).stack ?? String(error)}\n`);
    process.exit(1);
  },
);

/**
 * The worker wire contract against the real server: a WorkerRuntime whose client checks every reply and
 * every command it receives against @tdp/protocol's worker schemas. The tasks it runs make the server
 * answer each kind of request (registration, heartbeat, acks, events:batch with accepted and refused
 * items, grants) and send START_ATTEMPT and CANCEL_ATTEMPT; a reply or command the schemas do not
 * describe (a field of another type, an unknown field or command type) fails the test.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  AccessGrant,
  NoContent,
  newId,
  WorkerCommand,
  WorkerEventsBatchReply,
  WorkerRegistered,
  WorkerRegistration,
} from '@tdp/protocol';
import { Type } from 'typebox';
import { Compile } from 'typebox/compile';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type FileStore, startFileStore } from '../../../test/fileStore.ts';
import { type Harness, startHarness } from '../../../test/harness.ts';
import { defineCapability, LocalStore, WorkerClient, WorkerRuntime } from '../src/index.ts';

const replyContracts: [RegExp, { Check(value: unknown): boolean; Errors(value: unknown): unknown[] }][] = [
  [/^POST \/v1\/workers\/register$/, Compile(WorkerRegistered)],
  [/^POST \/v1\/workers\/[^/]+\/heartbeat$/, Compile(NoContent)],
  [/^POST \/v1\/workers\/[^/]+\/commands:ack$/, Compile(NoContent)],
  [/^POST \/v1\/workers\/[^/]+\/events:batch$/, Compile(WorkerEventsBatchReply)],
  [/^POST \/v1\/attempts\/[^/]+\/(grants|artifacts)$/, Compile(AccessGrant)],
  [/^POST \/v1\/attempts\/[^/]+\/grants\/[^/]+:renew$/, Compile(AccessGrant)],
];
const commandContract = Compile(WorkerCommand);
/** Requests the runtime builds itself (the server checks them too; here the runtime's side is checked). */
const requestContracts: [RegExp, { Check(value: unknown): boolean; Errors(value: unknown): unknown[] }][] = [
  [/^POST \/v1\/workers\/register$/, Compile(WorkerRegistration)],
];

/** What the client received, by request (or `command <type>`), and what did not match the contract. */
const seen = new Map<string, number>();
const violations: { what: string; value: unknown; errors: unknown[] }[] = [];

class CheckingClient extends WorkerClient {
  protected override async call(
    method: string,
    path: string,
    body?: unknown,
    extraHeaders?: Record<string, string>,
  ): Promise<unknown> {
    const what = `${method} ${path}`;
    const request = requestContracts.find(([pattern]) => pattern.test(what));
    if (request && !request[1].Check(body))
      violations.push({ what: `request ${what}`, value: body, errors: request[1].Errors(body) });
    const reply = await super.call(method, path, body, extraHeaders);
    // Attempt heartbeats belong to the status API (status.ts), not to this contract.
    if (path === '/v1/task-heartbeats:batch') return reply;
    const contract = replyContracts.find(([pattern]) => pattern.test(what));
    if (!contract) violations.push({ what, value: reply, errors: ['no contract for this request'] });
    else if (!contract[1].Check(reply))
      violations.push({ what, value: reply, errors: contract[1].Errors(reply) });
    const kind = what.replace(/[0-9a-f]{8}-[0-9a-f-]{27}/g, '{id}');
    seen.set(kind, (seen.get(kind) ?? 0) + 1);
    return reply;
  }

  override streamCommands(
    workerId: string,
    lastEventId: string | null,
    signal: AbortSignal,
    onCommand: (command: WorkerCommand) => void,
  ): Promise<void> {
    return super.streamCommands(workerId, lastEventId, signal, (command) => {
      if (!commandContract.Check(command))
        violations.push({ what: 'command', value: command, errors: commandContract.Errors(command) });
      seen.set(`command ${command.type}`, (seen.get(`command ${command.type}`) ?? 0) + 1);
      onCommand(command);
    });
  }
}

const copy = defineCapability({
  name: 'contract.copy',
  version: '1',
  // Registered with its own limit (the wire contract's per-capability maxConcurrency).
  maxConcurrency: 2,
  input: Type.Object({ source: Type.String() }),
  output: Type.Object({ copy: Type.String(), bytes: Type.Number() }),
  async run(ctx, input) {
    ctx.progress(10, { phase: 'downloading' });
    const path = await ctx.download(input.source);
    const output = await ctx.allocateOutput({
      relativePath: 'copy.bin',
      mediaType: 'application/octet-stream',
      maxBytes: 1_000,
    });
    const { copyFile } = await import('node:fs/promises');
    await copyFile(path, output.path);
    ctx.progress(90, { phase: 'uploading' });
    const uploaded = await output.upload();
    return { copy: uploaded.resourceRef, bytes: uploaded.bytes };
  },
});

const wait = defineCapability({
  name: 'contract.wait',
  version: '1',
  input: Type.Object({}),
  output: Type.Object({}),
  run: (ctx) =>
    new Promise((_, reject) => ctx.signal.addEventListener('abort', () => reject(new Error('aborted')))),
});

let h: Harness;
let files: FileStore;
let app: Awaited<ReturnType<Harness['createApplication']>>;
let client: CheckingClient;
let runtime: WorkerRuntime;
const directory = mkdtempSync(join(tmpdir(), 'tdp-contract-'));

beforeAll(async () => {
  files = await startFileStore();
  h = await startHarness({ runLoops: true, allowInsecureCallbacks: true });
  app = await h.createApplication();
  await h.request('PUT', `/admin/v1/applications/${app.applicationId}/resource-provider`, {
    token: h.adminToken,
    body: { url: files.providerUrl, bearerToken: files.token },
  });
  for (const [name, capability, inputMapping] of [
    ['contract-copy', 'contract.copy', { source: '$.input.source' }],
    ['contract-wait', 'contract.wait', {}],
  ] as const)
    await h.request('POST', '/v1/workflow-definitions', {
      token: app.apiKey,
      body: {
        name,
        version: '1',
        steps: [{ key: 'only', capability, capabilityVersion: '1', inputMapping, retry: { maxAttempts: 1 } }],
      },
    });
  const workerKey = (
    await h.request('POST', '/admin/v1/worker-credentials', { token: h.adminToken, body: {} })
  ).body.key;
  client = new CheckingClient(h.url, workerKey, 5_000);
  runtime = new WorkerRuntime({
    client,
    store: new LocalStore(join(directory, 'worker.db'), newId),
    capabilities: [copy, wait],
    nodeId: 'node-contract',
    progressIntervalMs: 0,
    workDirectory: join(directory, 'work'),
    // The test storage listens on 127.0.0.1, which the egress policy refuses unless allowed.
    egressAllow: ['127.0.0.0/8'],
  });
  await runtime.start();
});
afterAll(async () => {
  await runtime?.stop();
  await client?.close();
  await h?.close();
  await files?.close();
});

/** Submits a task and waits until `read` of its view (GET /v1/tasks/{id}) gives `expected`. */
async function submitAndWait(
  workflowName: string,
  input: Record<string, unknown>,
  read: (view: any) => unknown,
  expected: string,
): Promise<string> {
  const created = await h.request('POST', '/v1/tasks', {
    token: app.apiKey,
    headers: { 'idempotency-key': newId() },
    body: { workflowName, workflowVersion: '1', name: workflowName, input },
  });
  const taskId = created.body.task.id as string;
  const view = async () => read((await h.request('GET', `/v1/tasks/${taskId}`, { token: app.apiKey })).body);
  await expect.poll(view, { timeout: 20_000 }).toBe(expected);
  return taskId;
}

const lifecycle = (view: any) => view.task.lifecycleStatus;

describe('the worker wire contract', () => {
  it('every reply and command the worker receives matches @tdp/protocol', async () => {
    files.files.set('contract-src', Buffer.from('contract bytes'));
    await submitAndWait('contract-copy', { source: 'contract-src' }, lifecycle, 'SUCCEEDED');
    const waiting = await submitAndWait(
      'contract-wait',
      {},
      (view) => view.execution.steps[0]?.status,
      'RUNNING',
    );
    await h.request('POST', `/v1/tasks/${waiting}:cancel`, { token: app.apiKey, body: {} });
    await expect
      .poll(
        async () => lifecycle((await h.request('GET', `/v1/tasks/${waiting}`, { token: app.apiKey })).body),
        {
          timeout: 20_000,
        },
      )
      .toBe('CANCELLED');

    // The replies the runtime does not provoke on its own in a short run: a heartbeat, an ack, a refusal.
    const workerId = runtime.id!;
    await client.heartbeat(workerId, 'READY');
    await expect
      .poll(() => seen.get('POST /v1/workers/{id}/commands:ack') ?? 0, { timeout: 5_000 })
      .toBeGreaterThan(0);
    const refused = await client.sendEvents(workerId, [
      { attemptId: newId(), leaseVersion: 1, eventId: newId(), eventType: 'STEP_STARTED', sourceSeq: 1 },
    ]);
    expect(refused).toMatchObject([{ ok: false, code: 'STEP_NOT_REGISTERED' }]);

    // The registration carried the capability's own limit, and the server kept it.
    const listed = (await h.request('GET', '/v1/workers', { token: app.apiKey })).body as {
      id: string;
      capabilities: unknown[];
    }[];
    expect(listed.find((w) => w.id === workerId)?.capabilities).toEqual([
      { name: 'contract.copy', version: '1', maxConcurrency: 2 },
      { name: 'contract.wait', version: '1' },
    ]);

    expect(violations).toEqual([]);
    for (const kind of [
      'POST /v1/workers/register',
      'POST /v1/workers/{id}/heartbeat',
      'POST /v1/workers/{id}/commands:ack',
      'POST /v1/workers/{id}/events:batch',
      'POST /v1/attempts/{id}/grants',
      'POST /v1/attempts/{id}/artifacts',
      'command START_ATTEMPT',
      'command CANCEL_ATTEMPT',
    ])
      expect(seen.get(kind), kind).toBeGreaterThan(0);
  });

  it('the schemas refuse what the server must not send: a field of another type, an unknown command', () => {
    const start = {
      commandId: newId(),
      type: 'START_ATTEMPT',
      attemptId: newId(),
      leaseVersion: 1,
      taskId: newId(),
      executionId: newId(),
      stepId: 'only',
      attempt: 1,
      capability: 'contract.copy',
      capabilityVersion: '1',
      input: {},
      executionToken: 'token',
      heartbeatIntervalSeconds: 10,
      timeouts: {},
    };
    expect(commandContract.Check(start)).toBe(true);
    expect(commandContract.Check({ ...start, leaseVersion: '1' })).toBe(false);
    expect(commandContract.Check({ ...start, surprise: true })).toBe(false);
    expect(commandContract.Check({ commandId: newId(), type: 'REBOOT' })).toBe(false);
    const outcome = {
      index: 0,
      eventId: newId(),
      ok: false,
      code: 'STALE_EXECUTION',
      status: 409,
      detail: '',
    };
    expect(Compile(WorkerEventsBatchReply).Check({ results: [outcome] })).toBe(true);
    expect(Compile(WorkerEventsBatchReply).Check({ results: [{ ...outcome, status: '409' }] })).toBe(false);
    // A worker of before per-capability limits (none given) registers as it always did.
    const registration = Compile(WorkerRegistration);
    const old = { instanceId: 'i', name: 'n', nodeId: 'node', capabilities: [{ name: 'a', version: '1' }] };
    expect(registration.Check(old)).toBe(true);
    expect(
      registration.Check({ ...old, capabilities: [{ name: 'a', version: '1', maxConcurrency: 1 }] }),
    ).toBe(true);
    expect(
      registration.Check({ ...old, capabilities: [{ name: 'a', version: '1', maxConcurrency: 0 }] }),
    ).toBe(false);
  });
});

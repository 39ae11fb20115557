/**
 * One trace across processes (docs/observability.md): `tdp server` and a worker runtime as real
 * processes, each exporting OTLP/HTTP JSON to a small receiver in this test. A task submitted with a
 * callback URL runs to its end; every span from the create to the callback is in one trace, each with
 * its parent in that trace. The server's log lines about the task carry the correlation fields.
 * With tracing off, nothing is traced or stored.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { newId } from '@tdp/protocol';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase } from '../../../test/database.ts';
import { type TdpProcess, tdpProcess } from '../../../test/tdpProcess.ts';
import { freePort } from '../../cli/src/embeddedPostgres.ts';
import { connectDatabase } from '../src/main.ts';

interface ReceivedSpan {
  service: string;
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
}

const workerScript = new URL('../../../test/tracedWorker.ts', import.meta.url).pathname;
const patience = { timeout: 30_000, interval: 100 };

/** An HTTP server on 127.0.0.1: its URL, what it received, and how to close it. */
async function listen(handle: (path: string, headers: IncomingHttpHeaders, body: string) => void) {
  const server: Server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      handle(request.url ?? '', request.headers, Buffer.concat(chunks).toString('utf8'));
      response.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address() as { port: number };
  return { url: `http://127.0.0.1:${address.port}`, close: () => server.close() };
}

/** The spans of an OTLP/HTTP JSON export (ExportTraceServiceRequest). */
function spansOf(body: string): ReceivedSpan[] {
  const request = JSON.parse(body) as {
    resourceSpans: {
      resource: { attributes: { key: string; value: { stringValue?: string } }[] };
      scopeSpans: { spans: Omit<ReceivedSpan, 'service'>[] }[];
    }[];
  };
  return request.resourceSpans.flatMap((resource) => {
    const service =
      resource.resource.attributes.find((a) => a.key === 'service.name')?.value.stringValue ?? '';
    return resource.scopeSpans.flatMap((scope) =>
      scope.spans.map((s) => ({
        service,
        traceId: s.traceId,
        spanId: s.spanId,
        parentSpanId: s.parentSpanId ?? '',
        name: s.name,
      })),
    );
  });
}

/**
 * A server, a worker and a callback receiver; `env` adds to both processes' environment, `transport` is
 * how the worker reports.
 */
async function startSystem(env: Record<string, string>, transport: 'rest' | 'grpc' = 'rest') {
  const database = await createTestDatabase();
  const callbacks: IncomingHttpHeaders[] = [];
  const callbackReceiver = await listen((_path, headers) => callbacks.push(headers));
  const logLines: Record<string, unknown>[] = [];
  const tdp = tdpProcess({
    databaseUrl: database.url,
    port: await freePort(),
    env: { ...env, TDP_LOG_LEVEL: 'info' },
    onLogLine: (line) => {
      if (line.startsWith('{')) logLines.push(JSON.parse(line));
    },
  });
  await tdp.start();
  const apiKey = await tdp.createApplication('traces');
  const workerKey = (await tdp.request('POST', '/admin/v1/worker-credentials', { body: {} })).body.key;
  const call = (method: string, path: string, body?: unknown) =>
    tdp.request(method, path, {
      token: apiKey,
      ...(body === undefined ? {} : { body, headers: { 'idempotency-key': newId() } }),
    });
  const published = await call('POST', '/v1/workflow-definitions', {
    name: 'traced',
    version: '1',
    steps: [
      {
        key: 'echo',
        capability: 'trace.echo',
        capabilityVersion: '1',
        inputMapping: { text: '$.input.text' },
      },
    ],
  });
  expect(published.status, JSON.stringify(published.body)).toBe(201);
  const directory = mkdtempSync(join(tmpdir(), 'tdp-traced-worker-'));
  const worker: ChildProcess = spawn(
    process.execPath,
    [
      '--conditions=@tdp/source',
      '--import',
      'tsx',
      workerScript,
      tdp.url,
      workerKey,
      join(directory, 'w.db'),
      transport,
    ],
    { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'inherit'] },
  );
  await new Promise<void>((resolve, reject) => {
    worker.once('exit', (code) => reject(new Error(`the worker exited with ${code}`)));
    createInterface({ input: worker.stdout! }).once('line', () => resolve());
  });
  const sql = connectDatabase({ url: database.url, maxConnections: 2 });
  return {
    tdp: tdp as TdpProcess,
    call,
    callbacks,
    callbackUrl: `${callbackReceiver.url}/callbacks`,
    logLines,
    sql,
    close: async () => {
      worker.kill('SIGTERM');
      await new Promise((resolve) => worker.once('exit', resolve));
      await tdp.stop('SIGTERM', 10_000);
      await tdp.kill();
      callbackReceiver.close();
      await sql.end();
      await database.drop();
      rmSync(directory, { recursive: true, force: true });
    },
  };
}

/** Submits a task and waits until it succeeded and its success callback arrived. */
async function runTask(system: Awaited<ReturnType<typeof startSystem>>) {
  const created = await system.call('POST', '/v1/tasks', {
    workflowName: 'traced',
    workflowVersion: '1',
    name: 'a traced task',
    input: { text: 'hello' },
    callbackUrl: system.callbackUrl,
  });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  const taskId = created.body.task.id as string;
  await expect
    .poll(async () => (await system.call('GET', `/v1/tasks/${taskId}`)).body.task.lifecycleStatus, patience)
    .toBe('SUCCEEDED');
  await expect.poll(() => system.callbacks.length, patience).toBeGreaterThanOrEqual(2);
  return { taskId, executionId: created.body.execution.id as string };
}

// The report's server span: a REST batch's route, or a round of the gRPC stream.
const reportSpans = {
  rest: 'POST /v1/workers/{id}/events:batch',
  grpc: 'Reporting/Report events',
} as const;

describe.each(['rest', 'grpc'] as const)('tracing on, reports over %s', (transport) => {
  const reportSpan = reportSpans[transport];
  const spans: ReceivedSpan[] = [];
  let receiver: Awaited<ReturnType<typeof listen>>;
  let system: Awaited<ReturnType<typeof startSystem>>;
  beforeAll(async () => {
    receiver = await listen((path, _headers, body) => {
      if (path === '/v1/traces') spans.push(...spansOf(body));
    });
    system = await startSystem(
      {
        OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
        OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
        // Export within a fraction of a second rather than the default five.
        OTEL_BSP_SCHEDULE_DELAY: '100',
      },
      transport,
    );
  }, 120_000);
  afterAll(async () => {
    await system?.close();
    receiver?.close();
  });

  it('follows a task in one trace from POST /v1/tasks to the callback, across server and worker', async () => {
    const { taskId } = await runTask(system);
    const names = [
      'POST /v1/tasks',
      'tdp.task.create',
      'tdp.schedule.place',
      'tdp.worker.attempt',
      'tdp.worker.report',
      reportSpan,
      'tdp.realtime.publish',
      'tdp.callback.deliver',
    ];
    const root = () => spans.find((s) => s.name === 'POST /v1/tasks');
    await expect
      .poll(
        () => names.filter((name) => !spans.some((s) => s.name === name && s.traceId === root()?.traceId)),
        patience,
      )
      .toEqual([]);
    const trace = spans.filter((s) => s.traceId === root()!.traceId);
    const byId = new Map(trace.map((s) => [s.spanId, s]));
    const parentOf = (name: string, service?: string) => {
      const span = trace.find((s) => s.name === name && (!service || s.service === service))!;
      return byId.get(span.parentSpanId)?.name;
    };
    // The request is the trace's root; each later step is a child of the one that caused it.
    expect(root()!.parentSpanId).toBe('');
    expect(parentOf('tdp.task.create')).toBe('POST /v1/tasks');
    expect(parentOf('tdp.schedule.place')).toBe('tdp.task.create');
    expect(parentOf('tdp.worker.attempt')).toBe('tdp.schedule.place');
    expect(parentOf('tdp.worker.report')).toBe('tdp.worker.attempt');
    expect(parentOf(reportSpan)).toBe('tdp.worker.report');
    expect(parentOf('tdp.callback.deliver')).toBe('tdp.task.create');
    // The reports' publications are children of the report that committed them.
    expect(
      trace
        .filter((s) => s.name === 'tdp.realtime.publish')
        .some((s) => byId.get(s.parentSpanId)?.name === reportSpan),
    ).toBe(true);
    expect(new Set(trace.map((s) => s.service))).toEqual(new Set(['tdp-server', 'tdp-worker']));
    // Every span's parent is in the trace (none hangs off a span that was never exported).
    for (const span of trace)
      if (span.parentSpanId) expect(byId.has(span.parentSpanId), span.name).toBe(true);

    // The traceparent travelled in the command, and the callback request carried this trace.
    const [command] = await system.sql`
      SELECT payload FROM worker_command WHERE type = 'START_ATTEMPT' AND payload->>'taskId' = ${taskId}`;
    expect((command!.payload as { traceparent?: string }).traceparent?.split('-')[1]).toBe(root()!.traceId);
    const callbackTraces = system.callbacks.map((h) => String(h.traceparent).split('-')[1]);
    expect(callbackTraces).toContain(root()!.traceId);
  });

  it("puts the correlation fields on the log lines of a task's run", async () => {
    const { taskId, executionId } = await runTask(system);
    const about = () => system.logLines.filter((line) => line.taskId === taskId);
    await expect
      .poll(() => about().filter((l) => l.msg === 'callback delivery').length, patience)
      .toBeGreaterThan(0);
    const created = about().find((l) => l.msg === 'task created')!;
    expect(created).toMatchObject({ executionId, taskVersion: '1' });
    expect(created.traceId).toMatch(/^[0-9a-f]{32}$/);
    const reported = about().filter((l) => l.msg === 'event reported');
    expect(reported.map((l) => l.eventType)).toEqual(
      expect.arrayContaining(['STEP_STARTED', 'STEP_COMPLETED']),
    );
    for (const line of reported) {
      expect(line).toMatchObject({ traceId: created.traceId, stepId: expect.any(String) });
      expect(line.eventId).toEqual(expect.any(String));
      expect(line.taskVersion).toEqual(expect.any(String));
    }
    const delivery = about().find((l) => l.msg === 'callback delivery')!;
    expect(delivery).toMatchObject({ executionId, traceId: created.traceId, outcome: 'DELIVERED' });
    expect(delivery.outboxId).toEqual(expect.any(String));
  });
});

describe('tracing off', () => {
  let system: Awaited<ReturnType<typeof startSystem>>;
  beforeAll(async () => {
    system = await startSystem({ OTEL_EXPORTER_OTLP_ENDPOINT: '' });
  }, 120_000);
  afterAll(() => system?.close());

  it('stores and sends no trace context', async () => {
    const { taskId } = await runTask(system);
    const [stored] = await system.sql`
      SELECT count(*)::int AS commands,
             count(*) FILTER (WHERE payload ? 'traceparent')::int AS traced,
             (SELECT count(*)::int FROM execution WHERE task_id = ${taskId} AND snapshot ? 'traceparent') AS snapshots
      FROM worker_command WHERE type = 'START_ATTEMPT' AND payload->>'taskId' = ${taskId}`;
    expect(stored).toEqual({ commands: 1, traced: 0, snapshots: 0 });
    expect(system.callbacks.every((h) => h.traceparent === undefined)).toBe(true);
  });
});

/**
 * gRPC reporting (docs/grpc.md) has REST's semantics: the same event through REST single, REST
 * batch, gRPC unary and the gRPC stream gets the same answer and taskVersion; an old attempt is refused
 * the same way on all four; a stream cut mid-batch, then a new stream, a new bind and a resend apply
 * each event once; heartbeats by key renew the lease.
 */
import { Metadata, type ServiceError } from '@grpc/grpc-js';
import { loadSync } from '@grpc/proto-loader';
import {
  eventMessageOf,
  grpcStatusDetailsKey,
  reportingProtoOptions,
  reportingProtoPath,
} from '@tdp/protocol';
import { ReportStreamClient, reportingClient } from '@tdp/worker/grpc';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Harness, startHarness } from '../../../test/harness.ts';
import { coordinator, documentSteps } from '../../../test/statusFixture.ts';
import { TcpProxy } from '../../../test/tcpProxy.ts';
import { ConfigError, configFromEnv, connectDatabase } from '../src/main.ts';

let h: Harness;
let c: Awaited<ReturnType<typeof coordinator>>;
let sql: ReturnType<typeof connectDatabase>;
let address: string;
const clients: { close(): void }[] = [];

beforeAll(async () => {
  // A small window, so a batch goes out in several rounds and a cut finds some of it unanswered; two
  // bindings per stream, so that a third forgets the first.
  h = await startHarness({ settings: { grpcStreamWindow: 10, grpcStreamMaxBindings: 2 } });
  c = await coordinator(h);
  sql = connectDatabase({ url: h.databaseUrl, maxConnections: 2 });
  address = `127.0.0.1:${h.server.grpcPort}`;
});
afterAll(async () => {
  for (const client of clients) client.close();
  await sql.end();
  await h.close();
});

const client = (at = address) => {
  const made = reportingClient(at);
  clients.push(made);
  return made as unknown as Record<string, (...args: unknown[]) => void> & { close(): void };
};

const definitions = loadSync(reportingProtoPath, reportingProtoOptions);
const decode = (name: string, bytes: Buffer) =>
  (definitions[`tdp.reporting.v1.${name}`] as unknown as { deserialize(b: Buffer): any }).deserialize(bytes);

/** A unary call: its reply, or its refusal as { grpcCode, problem } (the Problem of the status details). */
function unary(method: 'ReportEvent' | 'Heartbeat', request: object, bearer?: string): Promise<any> {
  const metadata = new Metadata();
  if (bearer) metadata.set('authorization', `Bearer ${bearer}`);
  return new Promise((resolve) =>
    client()[method]!(request, metadata, (error: ServiceError | null, reply: unknown) => {
      if (!error) return resolve(reply);
      const status = decode('RpcStatus', error.metadata.get(grpcStatusDetailsKey)[0] as Buffer);
      resolve({ grpcCode: error.code, problem: decode('Problem', status.details[0].value) });
    }),
  );
}

const restBatch = (events: Record<string, unknown>[]) =>
  h.request('POST', '/v1/task-events:batch', { body: { events } });

async function boundStream(executionToken: string, at = address) {
  const stream = new ReportStreamClient(client(at) as never, null);
  const bound = await stream.bind({ executionToken });
  expect(bound.outcome).toBe('bound');
  return { stream, key: bound.bound!.streamExecutionKey };
}

describe('gRPC reporting', () => {
  it('the same eventId gets the same answer and taskVersion through REST single, REST batch, gRPC unary and the stream', async () => {
    const { ctx } = await c.runningContext();
    const { stream, key } = await boundStream(ctx.executionToken);
    // First through REST, then replayed on the other three.
    const started = c.event(ctx);
    const first = await c.report(ctx, started);
    expect(first.status).toBe(200);
    const batch = await restBatch([{ ...started, executionToken: ctx.executionToken }]);
    const viaUnary = await unary('ReportEvent', {
      executionToken: ctx.executionToken,
      event: eventMessageOf(started),
    });
    const viaStream = await stream.event(key, eventMessageOf(started));
    for (const answer of [batch.body.results[0].result, viaUnary, viaStream.event]) {
      expect(answer).toMatchObject({
        eventId: started.eventId,
        duplicate: true,
        taskVersion: first.body.taskVersion,
      });
    }
    // First on the stream, then replayed on the other three.
    const progress = c.event(ctx, { sourceSeq: 2, eventType: 'STEP_PROGRESS', progress: { percent: 40 } });
    const streamed = await stream.event(key, eventMessageOf(progress));
    expect(streamed.event).toMatchObject({ duplicate: false, accepted: true });
    const again = [
      (await c.report(ctx, progress)).body,
      (await restBatch([{ ...progress, executionToken: ctx.executionToken }])).body.results[0].result,
      await unary('ReportEvent', { event: eventMessageOf(progress) }, ctx.executionToken),
    ];
    for (const answer of again)
      expect(answer).toMatchObject({ duplicate: true, taskVersion: streamed.event!.taskVersion });
    const rows =
      await sql`SELECT count(*)::int AS n FROM task_event WHERE task_id = ${ctx.taskId} AND id IN ${sql([started.eventId, progress.eventId])}`;
    expect(rows[0]!.n).toBe(2);
    stream.close();
  });

  it('an old attempt is refused the same way on all four: STALE_EXECUTION, 409, not retryable', async () => {
    const { taskId, ctx } = await c.runningContext();
    await c.report(ctx, c.event(ctx));
    await c.report(
      ctx,
      c.event(ctx, {
        sourceSeq: 2,
        eventType: 'STEP_FAILED',
        error: { category: 'DEPENDENCY', code: 'TIMEOUT', retryable: true },
      }),
    );
    const retry = await c.activate(taskId, '01_prepare', 2);
    const late = c.event(ctx, { sourceSeq: 3, eventType: 'STEP_COMPLETED' });
    const rest = await c.report(ctx, late);
    expect(rest.status).toBe(409);
    const batch = (await restBatch([{ ...late, executionToken: ctx.executionToken }])).body.results[0].error;
    const viaUnary = await unary('ReportEvent', {
      executionToken: ctx.executionToken,
      event: eventMessageOf(late),
    });
    const { stream, key } = await boundStream(ctx.executionToken);
    const viaStream = (await stream.event(key, eventMessageOf(late))).problem!;
    expect(rest.body).toMatchObject({ code: 'STALE_EXECUTION', status: 409, retryable: false });
    expect(batch).toMatchObject({ code: 'STALE_EXECUTION', status: 409 });
    expect(viaUnary.grpcCode).toBe(9); // FAILED_PRECONDITION, what 409 maps to
    for (const problem of [viaUnary.problem, viaStream])
      expect(problem).toMatchObject({
        code: 'STALE_EXECUTION',
        status: 409,
        retryable: false,
        title: rest.body.title,
      });
    // Nothing was written for it, and the new attempt still reports.
    expect((await sql`SELECT 1 FROM task_event WHERE id = ${late.eventId}`).length).toBe(0);
    expect((await c.report(retry, c.event(retry))).body.lifecycleStatus).toBe('RUNNING');
    // Bad input is refused alike too: the same code from REST's schema and the gRPC adapter's.
    const bad = c.event(retry, { sourceSeq: 2, eventType: 'STEP_PROGRESS', phaseCode: 'not valid!' });
    expect((await c.report(retry, bad)).body.code).toBe('VALIDATION_FAILED');
    expect(
      (await unary('ReportEvent', { event: eventMessageOf(bad) }, retry.executionToken)).problem.code,
    ).toBe('VALIDATION_FAILED');
    stream.close();
  });

  it('a stream cut mid-batch: a new stream, a new bind and a resend apply every event once', async () => {
    const proxy = new TcpProxy('127.0.0.1', h.server.grpcPort!);
    const port = await proxy.start();
    const { ctx } = await c.runningContext();
    const events = [
      c.event(ctx),
      ...Array.from({ length: 99 }, (_, i) =>
        c.event(ctx, {
          sourceSeq: i + 2,
          eventType: 'STEP_PROGRESS',
          progress: { current: i + 1, total: 99 },
        }),
      ),
    ];
    const { stream, key } = await boundStream(ctx.executionToken, `127.0.0.1:${port}`);
    let answered = 0;
    const first = events.map((event) =>
      stream.event(key, eventMessageOf(event)).then((result) => {
        answered += 1;
        if (answered === 35) void proxy.cut();
        return result;
      }),
    );
    const outcomes = await Promise.allSettled(first);
    const lost = outcomes.filter((o) => o.status === 'rejected');
    expect(lost.length).toBeGreaterThan(0);
    expect((lost[0] as PromiseRejectedResult).reason.name).toBe('UnavailableError');

    await proxy.restore();
    // The old key died with its stream: the client binds again and resends everything it sent.
    const again = await boundStream(ctx.executionToken, `127.0.0.1:${port}`);
    const resent = await Promise.all(
      events.map((event) => again.stream.event(again.key, eventMessageOf(event))),
    );
    expect(resent.every((r) => r.outcome === 'event')).toBe(true);
    const duplicates = resent.filter((r) => r.event!.duplicate).length;
    expect(duplicates).toBeGreaterThanOrEqual(35);
    const stored = await sql`
      SELECT count(*)::int AS n, count(DISTINCT task_version)::int AS versions
      FROM task_event WHERE id IN ${sql(events.map((e) => e.eventId))}`;
    expect(stored[0]).toEqual({ n: 100, versions: 100 });
    // An answer given before the cut is the answer given again.
    outcomes.forEach((o, i) => {
      if (o.status === 'fulfilled') expect(resent[i]!.event!.taskVersion).toBe(o.value.event!.taskVersion);
    });
    again.stream.close();
    await proxy.cut();
  });

  it('heartbeats by key renew the lease; a repeated heartbeatSeq does not; a key of another stream is unknown', async () => {
    const wf = await c.createWorkflow({
      tasks: [
        {
          clientTaskKey: 'hb',
          title: 'Heartbeats',
          knownSteps: [{ ...documentSteps[0], heartbeatTimeoutSeconds: 60 }],
        },
      ],
    });
    const ctx = await c.activate(wf.tasks[0]!.taskId, '01_prepare');
    await c.report(ctx, c.event(ctx));
    const { stream, key } = await boundStream(ctx.executionToken);
    const beat = await stream.heartbeat(key, 5);
    expect(beat.heartbeat).toMatchObject({
      accepted: true,
      outcome: 'ACCEPTED',
      executionId: ctx.executionId,
    });
    const [lease] =
      await sql`SELECT heartbeat_seq FROM execution_lease WHERE attempt_id = ${ctx.executionId}`;
    expect(lease!.heartbeat_seq).toBe(5n);
    expect((await stream.heartbeat(key, 5)).heartbeat).toMatchObject({
      accepted: false,
      outcome: 'DUPLICATE',
    });
    expect(await unary('Heartbeat', { executionToken: ctx.executionToken, heartbeatSeq: 6 })).toMatchObject({
      accepted: true,
      outcome: 'ACCEPTED',
    });
    // Keys are the stream's own: on a new stream the same number means nothing until bound there.
    const other = new ReportStreamClient(client() as never, null);
    const unbound = await other.heartbeat(key, 7);
    expect(unbound.problem).toMatchObject({ code: 'STREAM_EXECUTION_KEY_UNKNOWN' });
    stream.close();
    other.close();
  });

  it('past grpcStreamMaxBindings the oldest binding is forgotten: its key is unknown until bound again', async () => {
    const contexts = [
      (await c.runningContext()).ctx,
      (await c.runningContext()).ctx,
      (await c.runningContext()).ctx,
    ];
    const stream = new ReportStreamClient(client() as never, null);
    const keys: number[] = [];
    for (const ctx of contexts)
      keys.push((await stream.bind({ executionToken: ctx.executionToken })).bound!.streamExecutionKey);
    const forgotten = await stream.event(keys[0]!, eventMessageOf(c.event(contexts[0]!)));
    expect(forgotten.problem).toMatchObject({ code: 'STREAM_EXECUTION_KEY_UNKNOWN', status: 409 });
    for (const [i, ctx] of contexts.slice(1).entries())
      expect((await stream.event(keys[i + 1]!, eventMessageOf(c.event(ctx)))).outcome).toBe('event');
    const again = (await stream.bind({ executionToken: contexts[0]!.executionToken })).bound!
      .streamExecutionKey;
    expect(again).not.toBe(keys[0]);
    expect((await stream.event(again, eventMessageOf(c.event(contexts[0]!)))).outcome).toBe('event');
    stream.close();
  });

  it('a client past its window has the stream ended with RESOURCE_EXHAUSTED', async () => {
    const { ctx } = await c.runningContext();
    const raw = client() as unknown as { Report(m: Metadata): any };
    const call = raw.Report(new Metadata());
    const ended = new Promise<any>((resolve) => call.on('error', resolve));
    call.on('data', () => {});
    // The task's row is locked elsewhere, so the first event waits and the others stay unanswered.
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const locked = sql.begin(async (tx) => {
      await tx`SELECT 1 FROM task WHERE id = ${ctx.taskId} FOR UPDATE`;
      await held;
    });
    await new Promise((resolve) => setTimeout(resolve, 100));
    call.write({ items: [{ requestId: 1, bind: { executionToken: ctx.executionToken } }] }); // key 1
    const events = Array.from({ length: 11 }, (_, i) =>
      c.event(ctx, { sourceSeq: i + 1, eventType: i === 0 ? 'STEP_STARTED' : 'STEP_PROGRESS' }),
    );
    // Eleven requests unanswered at once, ignoring the window of 10 the server announced.
    call.write({
      items: events.map((event, i) => ({
        requestId: i + 2,
        event: { streamExecutionKey: 1, event: eventMessageOf(event) },
      })),
    });
    expect((await ended).code).toBe(8);
    release();
    await locked;
  });

  // Last: it shuts the server down.
  it('on shutdown an open stream is ended with UNAVAILABLE (SHUTTING_DOWN) and the server closes', async () => {
    const { ctx } = await c.runningContext();
    const { stream, key } = await boundStream(ctx.executionToken);
    expect((await stream.event(key, eventMessageOf(c.event(ctx)))).outcome).toBe('event');
    const raw = (stream as unknown as { call: NodeJS.EventEmitter }).call;
    const status = new Promise<{ code: number; details: string }>((resolve) => raw.on('status', resolve));
    await h.server.close();
    expect(await status).toMatchObject({ code: 14, details: expect.stringContaining('SHUTTING_DOWN') });
  });
});

describe('the grpcPort setting', () => {
  const env = { DATABASE_URL: 'postgres://x', TDP_ADMIN_TOKEN: 'a'.repeat(16), TDP_SECRET_KEYS: '' };
  const base = { secretKeyring: { activeKeyId: 'k', keys: new Map() } } as never;
  it('is a free port by default, a port from TDP_GRPC_PORT, off with "off"; anything else is refused', () => {
    expect(configFromEnv(env, base).grpcPort).toBe(0);
    expect(configFromEnv({ ...env, TDP_GRPC_PORT: '7443' }, base).grpcPort).toBe(7443);
    expect(configFromEnv({ ...env, TDP_GRPC_PORT: 'off' }, base).grpcPort).toBeNull();
    expect(() => configFromEnv({ ...env, TDP_GRPC_PORT: 'yes' }, base)).toThrow(ConfigError);
  });
});

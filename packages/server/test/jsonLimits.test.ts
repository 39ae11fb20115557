/**
 * Bad JSON is a 4xx on every way in (docs/errors.md, JSON_TOO_DEEP and JSON_UNPAIRED_SURROGATE): a body
 * nested 4,000 levels, and one with an unpaired surrogate (`\ud800`) in a value or in a key, are refused
 * with their code by REST (create, report events, batch, signals) and by gRPC reporting (unary and the
 * stream), write nothing, and the server keeps serving; a well-formed pair ("\ud83d\ude00") still passes.
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
import { coordinator } from '../../../test/statusFixture.ts';
import { canonicalJson } from '../src/core/shared/canonicalJson.ts';
import { configFromEnv, connectDatabase } from '../src/main.ts';

let h: Harness;
let c: Awaited<ReturnType<typeof coordinator>>;
let sql: ReturnType<typeof connectDatabase>;
const clients: { close(): void }[] = [];

/** `{"a":{"a":…1…}}`, `levels` objects deep, as JSON text. */
const deepText = (levels: number) => `${'{"a":'.repeat(levels)}1${'}'.repeat(levels)}`;
/** Three bodies the server must refuse, as JSON text (the escapes stay escapes on the wire). */
const hostile = [
  { name: 'nested 4,000 levels', json: deepText(4000), code: 'JSON_TOO_DEEP' },
  { name: 'an unpaired surrogate in a value', json: '{"note":"x\\ud800"}', code: 'JSON_UNPAIRED_SURROGATE' },
  { name: 'an unpaired surrogate in a key', json: '{"\\udc00k":1}', code: 'JSON_UNPAIRED_SURROGATE' },
] as const;
const emoji = '\ud83d\ude00';

/** Rows of every table these requests could write. */
const rowCounts = async () =>
  (
    await sql`SELECT (SELECT count(*) FROM task)::int AS tasks,
                     (SELECT count(*) FROM task_event)::int AS events,
                     (SELECT count(*) FROM task_signal)::int AS signals,
                     (SELECT count(*) FROM idempotency)::int AS idempotency,
                     (SELECT count(*) FROM event_dedup)::int AS dedup`
  )[0];

const raw = (method: string, path: string, json: string, token: string, key = `k-${Math.random()}`) =>
  h.request(method, path, { token, rawBody: json, headers: { 'idempotency-key': key } });

const expectRefused = (
  answer: { status: number; body: any; headers: Headers },
  code: string,
  context: string,
) => {
  expect(answer.status, context).toBe(400);
  expect(answer.headers.get('content-type'), context).toContain('application/problem+json');
  expect(answer.body, context).toMatchObject({ code, status: 400, retryable: false });
};

beforeAll(async () => {
  h = await startHarness();
  c = await coordinator(h);
  sql = connectDatabase({ url: h.databaseUrl, maxConnections: 2 });
  const published = await c.call('POST', '/v1/workflow-definitions', {
    name: 'wait-for-go',
    version: '1',
    steps: [{ key: 'go', kind: 'signal', signal: { name: 'go', timeoutMs: 600_000 } }],
  });
  expect(published.status).toBe(201);
});
afterAll(async () => {
  for (const client of clients) client.close();
  await sql.end();
  await h.close();
});

const createBody = (input: string) =>
  `{"workflowName":"wait-for-go","workflowVersion":"1","name":"json limits","input":${input}}`;

describe('REST: the body parser refuses bad JSON before any handler', () => {
  it('POST /v1/tasks: a deep input, and an unpaired surrogate in a value or a key, are 400 with their code and create nothing', async () => {
    const before = await rowCounts();
    for (const { name, json, code } of hostile)
      expectRefused(await raw('POST', '/v1/tasks', createBody(json), c.app.apiKey), code, name);
    expect(await rowCounts()).toEqual(before);
    // The server still serves, and a well-formed surrogate pair goes through untouched.
    const created = await raw(
      'POST',
      '/v1/tasks',
      createBody(`{"note":"\\ud83d\\ude00","${emoji}":1}`),
      c.app.apiKey,
    );
    expect(created.status).toBe(201);
    const task = await c.task(created.body.task.id);
    expect(task.task.input).toEqual({ note: emoji, [emoji]: 1 });
  });

  it('POST /v1/task-events and :batch: bad JSON in an event is refused with its code and records nothing', async () => {
    const { ctx } = await c.runningContext();
    const before = await rowCounts();
    for (const { name, json, code } of hostile) {
      const event = JSON.stringify(
        c.event(ctx, { eventType: 'STEP_PROGRESS', data: { schema: 'x', value: 0 } }),
      );
      // The hostile JSON goes in as the event's data value.
      const body = event.replace('"value":0', `"value":${json}`);
      expectRefused(await raw('POST', '/v1/task-events', body, ctx.executionToken), code, name);
      const batch = `{"events":[${body.replace(/}$/, `,"executionToken":"${ctx.executionToken}"}`)}]}`;
      expectRefused(
        await raw('POST', '/v1/task-events:batch', batch, ctx.executionToken),
        code,
        `${name} (batch)`,
      );
    }
    // A lone surrogate in a plain string field (the message) as well.
    const lone = JSON.stringify(c.event(ctx, { message: 'MSG' })).replace('MSG', 'done \\udfff');
    expectRefused(
      await raw('POST', '/v1/task-events', lone, ctx.executionToken),
      'JSON_UNPAIRED_SURROGATE',
      'message',
    );
    expect(await rowCounts()).toEqual(before);
    const good = c.event(ctx, { message: `started ${emoji}` });
    const accepted = await c.report(ctx, good);
    expect(accepted.status).toBe(200);
    const [row] = await sql`SELECT payload FROM task_event WHERE id = ${good.eventId}`;
    expect(JSON.stringify(row)).toContain(emoji);
  });

  it('POST /v1/tasks/:id/signals/:name: a bad payload is refused with its code and kept nowhere; a good one is kept as sent', async () => {
    const created = await raw('POST', '/v1/tasks', createBody('{}'), c.app.apiKey);
    const taskId = created.body.task.id as string;
    const before = await rowCounts();
    for (const { name, json, code } of hostile)
      expectRefused(
        await raw('POST', `/v1/tasks/${taskId}/signals/go`, `{"payload":${json}}`, c.app.apiKey),
        code,
        name,
      );
    expect(await rowCounts()).toEqual(before);
    const sent = await raw(
      'POST',
      `/v1/tasks/${taskId}/signals/go`,
      `{"payload":{"ok":"${emoji}"}}`,
      c.app.apiKey,
    );
    expect(sent.status).toBe(202);
    const [row] = await sql`SELECT payload FROM task_signal WHERE id = ${sent.body.signalId}`;
    expect(row!.payload).toEqual({ ok: emoji });
  });
});

describe('gRPC reporting refuses the same JSON with the same codes', () => {
  const definitions = loadSync(reportingProtoPath, reportingProtoOptions);
  const decode = (name: string, bytes: Buffer) =>
    (definitions[`tdp.reporting.v1.${name}`] as unknown as { deserialize(b: Buffer): any }).deserialize(
      bytes,
    );
  const client = () => {
    const made = reportingClient(`127.0.0.1:${h.server.grpcPort}`);
    clients.push(made);
    return made as unknown as Record<string, (...args: unknown[]) => void> & { close(): void };
  };
  const reportEvent = (request: object): Promise<any> =>
    new Promise((resolve) =>
      client().ReportEvent!(request, new Metadata(), (error: ServiceError | null, reply: unknown) => {
        if (!error) return resolve(reply);
        const status = decode('RpcStatus', error.metadata.get(grpcStatusDetailsKey)[0] as Buffer);
        resolve({ grpcCode: error.code, problem: decode('Problem', status.details[0].value) });
      }),
    );

  /**
   * The hostile cases as gRPC events: JSON text in data.value_json. (A proto string field cannot carry
   * an unpaired surrogate: protobuf strings are UTF-8 and decoded with replacement characters.)
   */
  const hostileEvents = (event: Record<string, unknown>) =>
    hostile.map(({ name, json, code }) => ({
      name,
      code,
      message: { ...eventMessageOf(event), data: { schema: 'x', valueJson: json } },
    }));

  it('ReportEvent (unary): INVALID_ARGUMENT carrying the code, nothing recorded', async () => {
    const { ctx } = await c.runningContext();
    const before = await rowCounts();
    for (const { name, code, message } of hostileEvents(c.event(ctx))) {
      const answer = await reportEvent({ executionToken: ctx.executionToken, event: message });
      expect(answer.grpcCode, name).toBe(3); // INVALID_ARGUMENT, what 400 maps to
      expect(answer.problem, name).toMatchObject({ code, status: 400, retryable: false });
    }
    expect(await rowCounts()).toEqual(before);
    const good = await reportEvent({
      executionToken: ctx.executionToken,
      event: eventMessageOf(c.event(ctx, { message: `go ${emoji}` })),
    });
    expect(good).toMatchObject({ accepted: true, duplicate: false });
  });

  it('the Report stream: each bad event gets its problem, the stream stays open and takes the next event', async () => {
    const { ctx } = await c.runningContext();
    const stream = new ReportStreamClient(client() as never, null);
    const bound = await stream.bind({ executionToken: ctx.executionToken });
    const key = bound.bound!.streamExecutionKey;
    const before = await rowCounts();
    for (const { name, code, message } of hostileEvents(c.event(ctx))) {
      const answer = await stream.event(key, message);
      expect(answer.problem, name).toMatchObject({ code, status: 400 });
    }
    expect(await rowCounts()).toEqual(before);
    const good = await stream.event(key, eventMessageOf(c.event(ctx, { message: `go ${emoji}` })));
    expect(good.event).toMatchObject({ accepted: true, duplicate: false });
    stream.close();
  });
});

describe('the limit and canonical JSON', () => {
  it('TDP_JSON_MAX_DEPTH sets the limit (64 by default) and refuses values outside 1..1000', () => {
    const env = {
      DATABASE_URL: 'postgres://x',
      TDP_ADMIN_TOKEN: 'a'.repeat(16),
      TDP_SECRET_KEYS: `k1:${Buffer.alloc(32).toString('base64')}`,
    };
    expect(configFromEnv(env).jsonMaxDepth).toBe(64);
    expect(configFromEnv({ ...env, TDP_JSON_MAX_DEPTH: '8' }).jsonMaxDepth).toBe(8);
    expect(() => configFromEnv({ ...env, TDP_JSON_MAX_DEPTH: '0' })).toThrow(/TDP_JSON_MAX_DEPTH/);
    expect(() => configFromEnv({ ...env, TDP_JSON_MAX_DEPTH: '1001' })).toThrow(/TDP_JSON_MAX_DEPTH/);
  });

  it('canonicalJson serialises a value nested 100,000 levels without overflowing the stack', () => {
    const deep = JSON.parse(deepText(100_000));
    expect(canonicalJson(deep)).toBe(deepText(100_000));
    expect(canonicalJson({ b: [1, { d: null, c: undefined }], a: 'x' })).toBe('{"a":"x","b":[1,{"d":null}]}');
  });
});

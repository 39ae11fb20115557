/**
 * What the client repeats and what it does not: a create whose answer was lost is sent again with the
 * same Idempotency-Key and returns the one task; a write without a key is sent once; a deadline per
 * attempt; 5xx retried with backoff; the caller's signal stops everything.
 */
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { newId } from '@tdp/protocol';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Harness, startHarness } from '../../../test/harness.ts';
import { TcpProxy } from '../../../test/tcpProxy.ts';
import { createTdpClient, type TdpClient, TdpNetworkError } from '../src/index.ts';

let h: Harness;
let proxy: TcpProxy;
let apiKey: string;
let direct: TdpClient;
let throughProxy: TdpClient;

beforeAll(async () => {
  h = await startHarness();
  apiKey = (await h.createApplication()).apiKey;
  const port = Number(new URL(h.url).port);
  proxy = new TcpProxy('127.0.0.1', port);
  await proxy.start();
  direct = createTdpClient({ baseUrl: h.url, apiKey });
  throughProxy = createTdpClient({
    baseUrl: `http://127.0.0.1:${proxy.port}`,
    apiKey,
    timeoutMs: 1_000,
    retries: 3,
    retryDelayMs: 10,
  });
  await direct.publishWorkflowDefinition({
    name: 'sdk-retries',
    version: '1',
    steps: [{ key: 'only', capability: 'nobody.retries', capabilityVersion: '1' }],
  });
});
afterAll(async () => {
  await proxy.cut();
  await h.close();
});

const request = (externalRef: string) => ({
  workflowName: 'sdk-retries',
  workflowVersion: '1',
  name: 'retried',
  externalRef,
});

describe('retries against a real server', () => {
  it('sends a create again after the connection dropped with its answer: one task, and the retry returns it', async () => {
    const externalRef = `dropped-${newId()}`;
    const cut = proxy.cutReplyWhen('HTTP/1.1 201');
    const created = await throughProxy.createTask(request(externalRef));
    await cut;
    expect(created.replayed).toBe(true);
    const tasks = await direct.listTasks({ externalRef });
    expect(tasks.items.map((t) => t.task.id)).toEqual([created.task.id]);
  });

  it('without retries the same cut is a TdpNetworkError (the answer really was lost)', async () => {
    const once = createTdpClient({ baseUrl: `http://127.0.0.1:${proxy.port}`, apiKey, retries: 0 });
    const externalRef = `lost-${newId()}`;
    proxy.cutReplyWhen('HTTP/1.1 201');
    const error = await once.createTask(request(externalRef)).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(TdpNetworkError);
    expect((error as TdpNetworkError).timedOut).toBe(false);
    expect((await direct.listTasks({ externalRef })).items).toHaveLength(1);
  });

  it('sends a create again after its attempt timed out, with the same key', async () => {
    const externalRef = `held-${newId()}`;
    const held = proxy.holdWhen('POST /v1/tasks');
    const created = await throughProxy.createTask(request(externalRef));
    await held;
    expect(created.replayed).toBe(false);
    expect((await direct.listTasks({ externalRef })).items.map((t) => t.task.id)).toEqual([created.task.id]);
  });

  it('never sends a write without a key twice: a lost retry answer is an error, and one execution was added', async () => {
    const { task } = await direct.createTask(request(`once-${newId()}`));
    await direct.cancelTask(task.id);
    proxy.cutReplyWhen('HTTP/1.1 201');
    const error = await throughProxy.retryTask(task.id).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(TdpNetworkError);
    expect((await direct.getTask(task.id)).execution.number).toBe(2);
  });

  it('gives up on a read past its deadline with a timed-out TdpNetworkError', async () => {
    const impatient = createTdpClient({
      baseUrl: `http://127.0.0.1:${proxy.port}`,
      apiKey,
      timeoutMs: 200,
      retries: 0,
    });
    const held = proxy.holdWhen('GET /v1/tasks');
    const error = await impatient.listTasks().catch((e: unknown) => e);
    await held;
    expect(error).toBeInstanceOf(TdpNetworkError);
    expect((error as TdpNetworkError).timedOut).toBe(true);
  });
});

describe('retries on answers', () => {
  let stub: Server;
  let stubUrl: string;
  const seen: IncomingHttpHeaders[] = [];
  let failuresLeft = 0;
  let answerHtml = false;

  beforeAll(async () => {
    // An upstream that fails like an overloaded replica (503 problems), then answers.
    stub = createServer((req, res) => {
      seen.push(req.headers);
      req.resume();
      if (answerHtml) {
        res
          .writeHead(failuresLeft > 0 ? 502 : 200, { 'content-type': 'text/html' })
          .end('<html>proxy</html>');
        failuresLeft = Math.max(0, failuresLeft - 1);
        return;
      }
      if (failuresLeft > 0) {
        failuresLeft -= 1;
        res.writeHead(503, { 'content-type': 'application/problem+json', 'retry-after': '0' });
        res.end(
          JSON.stringify({
            code: 'NOT_READY',
            status: 503,
            title: 'x',
            detail: 'warming up',
            retryable: true,
          }),
        );
        return;
      }
      res.writeHead(201, { 'content-type': 'application/json' }).end(JSON.stringify({ task: { id: 't1' } }));
    });
    await new Promise<void>((resolve) => stub.listen(0, '127.0.0.1', resolve));
    const address = stub.address();
    stubUrl = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
  });
  afterAll(() => new Promise((resolve) => stub.close(resolve)));

  it('retries 5xx with the same Idempotency-Key, then returns the answer', async () => {
    seen.length = 0;
    failuresLeft = 2;
    const client = createTdpClient({ baseUrl: stubUrl, apiKey: 'tdp_x', retries: 3, retryDelayMs: 5 });
    const created = await client.createTask({ workflowName: 'w', workflowVersion: '1', name: 'n' });
    expect(created.task.id).toBe('t1');
    expect(seen.map((headers) => headers['idempotency-key'])).toEqual([
      created.idempotencyKey,
      created.idempotencyKey,
      created.idempotencyKey,
    ]);
  });

  it('stops at the retry limit with the last problem', async () => {
    seen.length = 0;
    failuresLeft = 10;
    const client = createTdpClient({ baseUrl: stubUrl, apiKey: 'tdp_x', retries: 2, retryDelayMs: 5 });
    await expect(client.getTask('t1')).rejects.toMatchObject({
      code: 'NOT_READY',
      status: 503,
      retryable: true,
    });
    expect(seen).toHaveLength(3);
  });

  it("stops retrying when the caller's signal aborts", async () => {
    seen.length = 0;
    failuresLeft = Number.POSITIVE_INFINITY;
    const client = createTdpClient({ baseUrl: stubUrl, apiKey: 'tdp_x', retries: 50, retryDelayMs: 50 });
    const controller = new AbortController();
    setTimeout(() => controller.abort(new Error('the page was closed')), 100);
    await expect(client.getTask('t1', { signal: controller.signal })).rejects.toThrow('the page was closed');
    // Nothing is sent after the abort: the pause it interrupted was the last. A request
    // already in flight when the abort came may still reach the stub, so count after it lands.
    await new Promise((resolve) => setTimeout(resolve, 100));
    const sent = seen.length;
    expect(sent).toBeLessThan(50);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(seen.length).toBe(sent);
    failuresLeft = 0;
  });

  it('reports an answer that is not TDP (a proxy page) as UNEXPECTED_RESPONSE, retried only when 5xx', async () => {
    answerHtml = true;
    try {
      const client = createTdpClient({ baseUrl: stubUrl, apiKey: 'tdp_x', retries: 3, retryDelayMs: 5 });
      seen.length = 0;
      failuresLeft = 10;
      await expect(client.getTask('t1')).rejects.toMatchObject({ code: 'UNEXPECTED_RESPONSE', status: 502 });
      expect(seen).toHaveLength(4);
      seen.length = 0;
      failuresLeft = 0;
      await expect(client.getTask('t1')).rejects.toMatchObject({
        code: 'UNEXPECTED_RESPONSE',
        status: 200,
        retryable: false,
      });
      expect(seen).toHaveLength(1);
    } finally {
      answerHtml = false;
    }
  });
});

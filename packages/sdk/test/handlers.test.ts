/**
 * The callback endpoints for Node's http, Express and Fastify: real callbacks of real tasks (delivered
 * once the handler resolved; a throw answers 500 and TDP sends it again), and signed requests for what
 * TDP never sends (bad signatures and bodies), the raw bytes, and the wait for the handler.
 */
import { createServer, type Server } from 'node:http';
import { signatureHeaderValue } from '@tdp/protocol';
import express from 'express';
import Fastify from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Harness, startHarness } from '../../../test/harness.ts';
import {
  type CallbackEvent,
  type CallbackHandlerOptions,
  createTdpClient,
  expressCallbackHandler,
  fastifyCallbackPlugin,
  nodeCallbackHandler,
  type TdpClient,
} from '../src/index.ts';

interface Endpoint {
  url: string;
  close(): Promise<void>;
}
type Mount = (options: CallbackHandlerOptions) => Promise<Endpoint>;

const path = '/tdp/callback';
const listening = async (server: Server): Promise<Endpoint> => {
  if (!server.listening) await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  return {
    url: `http://127.0.0.1:${port}${path}`,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
};

const frameworks: [string, Mount][] = [
  ['node http', (options) => listening(createServer(nodeCallbackHandler(options)))],
  [
    'Express',
    (options) => {
      const app = express();
      app.post(path, expressCallbackHandler(options));
      app.use(express.json());
      return listening(app.listen(0, '127.0.0.1'));
    },
  ],
  [
    'Express behind express.raw()',
    (options) => {
      const app = express();
      app.post(path, express.raw({ type: '*/*' }), expressCallbackHandler(options));
      return listening(app.listen(0, '127.0.0.1'));
    },
  ],
  [
    'Fastify',
    async (options) => {
      const app = Fastify();
      await app.register(fastifyCallbackPlugin({ ...options, path }));
      await app.listen({ port: 0, host: '127.0.0.1' });
      const address = app.server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      return { url: `http://127.0.0.1:${port}${path}`, close: () => app.close() };
    },
  ],
];

let h: Harness;
let tdp: TdpClient;
let callbackSecret: string;

beforeAll(async () => {
  h = await startHarness({ runLoops: true, allowInsecureCallbacks: true });
  const app = await h.createApplication();
  callbackSecret = app.callbackSecret;
  tdp = createTdpClient({ baseUrl: h.url, apiKey: app.apiKey });
  await tdp.publishWorkflowDefinition({
    name: 'sdk-callbacks',
    version: '1',
    steps: [{ key: 'only', capability: 'nobody.callbacks', capabilityVersion: '1' }],
  });
});
afterAll(() => h.close());

/** A task whose callbacks go to `url` (no worker runs it: its one callback is `execution.created`). */
const taskCallingBack = async (url: string) =>
  (
    await tdp.createTask({
      workflowName: 'sdk-callbacks',
      workflowVersion: '1',
      name: 'called back',
      callbackUrl: url,
    })
  ).task;

/** How TDP's delivery log has each callback of the task: [status, responseStatus, attempts, lastError]. */
const deliveryLog = async (taskId: string) =>
  (await tdp.listCallbackDeliveries(taskId)).map((d) => [
    d.status,
    d.responseStatus,
    d.attempts,
    d.lastError,
  ]);

/** A callback body as TDP would send it, with odd spacing so that re-serialising it would change it. */
const bodyOf = (eventId: string) =>
  `{"specVersion":"1.0", "eventId":"${eventId}","type":"execution.created","sequence":1,` +
  `"taskId":"t1","note":"caf\\u00e9  "}`;
const signed = (body: string | Buffer, secrets = [callbackSecret], t = Math.floor(Date.now() / 1000)) => ({
  'content-type': 'application/json',
  'tdp-signature': signatureHeaderValue(secrets, t, body),
});

describe.each(frameworks)('%s callback endpoint', (_name, mount) => {
  it('takes a real callback: answered 2xx after the handler resolved, with the bytes TDP signed', async () => {
    const received: { event: CallbackEvent; raw: Buffer }[] = [];
    const endpoint = await mount({
      secrets: [callbackSecret],
      onCallback: async (event, raw) => {
        received.push({ event, raw });
      },
    });
    try {
      const task = await taskCallingBack(endpoint.url);
      await expect
        .poll(() => deliveryLog(task.id), { timeout: 10_000 })
        .toEqual([['DELIVERED', 204, 1, null]]);
      expect(received.map((r) => [r.event.taskId, r.event.type, r.event.sequence])).toEqual([
        [task.id, 'execution.created', 1],
      ]);
      expect(JSON.parse(received[0]!.raw.toString())).toEqual(received[0]!.event);
    } finally {
      await endpoint.close();
    }
  });

  it('answers 500 when the handler throws, so TDP sends the callback again', async () => {
    let calls = 0;
    const failures: unknown[] = [];
    const endpoint = await mount({
      secrets: [callbackSecret],
      onCallback: () => {
        calls += 1;
        if (calls === 1) throw new Error('database down');
      },
      onError: (error) => failures.push(error),
    });
    try {
      const task = await taskCallingBack(endpoint.url);
      await expect
        .poll(() => deliveryLog(task.id), { timeout: 10_000 })
        .toEqual([['RETRYING', null, 1, 'HTTP 500']]);
      expect(failures.map((e) => (e as Error).message)).toEqual(['database down']);
      h.clock.advance(4_000); // past the first retry's back-off (2 s plus up to 1 s of jitter)
      await expect
        .poll(() => deliveryLog(task.id), { timeout: 10_000 })
        .toEqual([['DELIVERED', 204, 2, null]]);
      expect(calls).toBe(2);
    } finally {
      await endpoint.close();
    }
  });

  it('answers 401 for a wrong secret, a stale signature or none, and 400 for a body that is not a callback', async () => {
    let calls = 0;
    const endpoint = await mount({
      secrets: [callbackSecret],
      maxBodyBytes: 4_096,
      onCallback: () => {
        calls += 1;
      },
    });
    const post = (body: string, headers: Record<string, string>) =>
      fetch(endpoint.url, { method: 'POST', body, headers }).then(async (r) => [r.status, await r.json()]);
    try {
      const body = bodyOf('e-bad');
      expect(await post(body, signed(body, ['whsec_wrong']))).toEqual([
        401,
        { error: 'SIGNATURE_INVALID', reason: 'MISMATCH' },
      ]);
      const stale = Math.floor(Date.now() / 1000) - 3_600;
      expect(await post(body, signed(body, [callbackSecret], stale))).toEqual([
        401,
        { error: 'SIGNATURE_INVALID', reason: 'EXPIRED' },
      ]);
      expect(await post(body, { 'content-type': 'application/json' })).toEqual([
        401,
        { error: 'SIGNATURE_INVALID', reason: 'MALFORMED' },
      ]);
      const notJson = '{"eventId": ';
      expect(await post(notJson, signed(notJson))).toEqual([400, { error: 'BODY_INVALID' }]);
      const notACallback = '{"hello":"world"}';
      expect(await post(notACallback, signed(notACallback))).toEqual([400, { error: 'BODY_INVALID' }]);
      const large = `{"eventId":"e-large","pad":"${'x'.repeat(5_000)}"}`;
      const tooLarge = await fetch(endpoint.url, { method: 'POST', body: large, headers: signed(large) });
      expect(tooLarge.status).toBe(413);
      expect(calls).toBe(0);
    } finally {
      await endpoint.close();
    }
  });

  it('reads a spec 1.0 delivery (committed before the upgrade) in the words of today', async () => {
    const received: CallbackEvent[] = [];
    const endpoint = await mount({
      secrets: [callbackSecret],
      onCallback: (event) => void received.push(event),
    });
    const post = (body: string) => fetch(endpoint.url, { method: 'POST', body, headers: signed(body) });
    const specOne = (type: string, status: string, spec = '1.0') =>
      JSON.stringify({
        specVersion: spec,
        eventId: `e-${type}-${spec}`,
        type,
        sequence: 1,
        taskId: 't1',
        status,
      });
    try {
      for (const body of [
        specOne('execution.canceled', 'CANCELED'),
        specOne('execution.canceling', 'CANCELING'),
        specOne('execution.canceled', 'CANCELED', '1.1'),
      ])
        expect((await post(body)).status).toBe(204);
      expect(received.map((e) => [e.specVersion, e.type, e.status])).toEqual([
        ['1.0', 'execution.cancelled', 'CANCELLED'],
        ['1.0', 'execution.cancelling', 'CANCELLING'],
        // A 1.1 body is taken as it is: only 1.0 spoke the old words.
        ['1.1', 'execution.canceled', 'CANCELED'],
      ]);
    } finally {
      await endpoint.close();
    }
  });

  it('passes the raw bytes unchanged and answers only once the handler resolved', async () => {
    let release: () => void = () => {};
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const received: Buffer[] = [];
    const endpoint = await mount({
      secrets: ['whsec_previous', callbackSecret],
      onCallback: async (_event, raw) => {
        received.push(raw);
        await gate;
      },
    });
    try {
      const body = bodyOf('e-raw');
      let answered = false;
      const answer = fetch(endpoint.url, { method: 'POST', body, headers: signed(body) }).then((r) => {
        answered = true;
        return r.status;
      });
      await expect.poll(() => received.length).toBe(1);
      await new Promise((resolve) => setTimeout(resolve, 100));
      expect(answered).toBe(false);
      release();
      expect(await answer).toBe(204);
      expect(received[0]!.equals(Buffer.from(body))).toBe(true);
    } finally {
      await endpoint.close();
    }
  });
});

describe('Fastify', () => {
  it('keeps parsing JSON outside the callback plugin', async () => {
    const app = Fastify();
    await app.register(fastifyCallbackPlugin({ secrets: [callbackSecret], onCallback: () => {}, path }));
    app.post('/echo', async (request) => ({ parsed: request.body }));
    try {
      const answer = await app.inject({ method: 'POST', url: '/echo', payload: { a: 1 } });
      expect(answer.json()).toEqual({ parsed: { a: 1 } });
    } finally {
      await app.close();
    }
  });
});

describe('Express behind express.json()', () => {
  it('answers 500 rather than verify a body that was parsed before it', async () => {
    const app = express();
    app.use(express.json());
    app.post(path, expressCallbackHandler({ secrets: [callbackSecret], onCallback: () => {} }));
    const endpoint = await listening(app.listen(0, '127.0.0.1'));
    try {
      const body = bodyOf('e-parsed');
      const response = await fetch(endpoint.url, { method: 'POST', body, headers: signed(body) });
      expect([response.status, await response.json()]).toEqual([500, { error: 'RAW_BODY_UNAVAILABLE' }]);
    } finally {
      await endpoint.close();
    }
  });
});

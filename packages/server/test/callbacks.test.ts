import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { newId, standardWebhookSecret, verifySignature } from '@tdp/protocol';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Harness, startHarness } from '../../../test/harness.ts';
import {
  type CallbackQueue,
  type ClaimedCallback,
  isPermanentFailure,
  sendDueCallbacks,
} from '../src/core/callbacks/sendCallbacks.ts';

/** The sender's decisions, over an in-memory queue: which answers deliver, retry or give up. */
function queueWith(deliveries: ClaimedCallback[]) {
  const outcomes: string[] = [];
  const queue: CallbackQueue = {
    claim: async () => deliveries.splice(0),
    delivered: async (_c, id, status) => {
      outcomes.push(`${id}:delivered:${status}`);
    },
    failed: async (_c, id, attempts, error) => {
      outcomes.push(`${id}:failed:${attempts}:${error}`);
    },
    dead: async (_c, id, error) => {
      outcomes.push(`${id}:dead:${error}`);
    },
  };
  return { queue, outcomes };
}

const delivery = (id: string, attempts = 1): ClaimedCallback => ({
  id,
  claimId: 'c',
  attempts,
  applicationId: 'app',
  taskId: 't',
  executionId: 'e',
  url: `https://app.example/${id}`,
  payload: { eventId: id, sequence: 1 },
});

describe('callback sender', () => {
  it('classifies answers: 2xx delivered, 410 and other 4xx dead, 408/429/5xx/network retried', async () => {
    expect([200, 204, 410, 400, 404, 408, 429, 500, 503].map(isPermanentFailure)).toEqual([
      false,
      false,
      true,
      true,
      true,
      false,
      false,
      false,
      false,
    ]);
    const statuses: Record<string, number | Error> = {
      ok: 204,
      gone: 410,
      bad: 422,
      slow: 429,
      down: 503,
      net: new Error('ECONNREFUSED'),
    };
    const { queue, outcomes } = queueWith(Object.keys(statuses).map((id) => delivery(id)));
    const bodies: { body: string; signature: string }[] = [];
    const report = await sendDueCallbacks(
      {
        queue,
        clock: { now: () => new Date('2026-01-01T00:00:00Z') },
        signingSecrets: async () => ['whsec_a'],
        post: async (url, body, headers) => {
          bodies.push({ body, signature: headers['TDP-Signature']! });
          const answer = statuses[url.split('/').at(-1)!]!;
          if (answer instanceof Error) throw answer;
          return { status: answer };
        },
        random: () => 0,
      },
      10,
    );
    expect(report).toEqual({ claimed: 6, delivered: 1, failed: 3, dead: 2 });
    expect(outcomes.sort()).toEqual([
      'bad:dead:HTTP 422',
      'down:failed:1:HTTP 503',
      'gone:dead:HTTP 410',
      'net:failed:1:ECONNREFUSED',
      'ok:delivered:204',
      'slow:failed:1:HTTP 429',
    ]);
    for (const b of bodies)
      expect(verifySignature(b.signature, b.body, 'whsec_a', 1_767_225_600)).toEqual({ ok: true });
  });

  it('signs an existing base64url secret both ways: TDP-Signature as before, Standard Webhooks for its whsec_ equivalent', async () => {
    // Secrets issued before Standard Webhooks were base64url, which `new Webhook(secret)` refuses.
    const stored = 'whsec_q-8_aZ0-Yk9uJ1x_Wm3Lr7Tc2Vb5Ne4Ha6Gd8Fs0Pw';
    expect(() => new Webhook(stored)).toThrow();
    const { queue } = queueWith([delivery('legacy')]);
    const now = new Date();
    let sent: { body: string; headers: Record<string, string> } | undefined;
    await sendDueCallbacks(
      {
        queue,
        clock: { now: () => now },
        signingSecrets: async () => [stored],
        post: async (_url, body, headers) => {
          sent = { body, headers };
          return { status: 204 };
        },
      },
      10,
    );
    const seconds = Math.floor(now.getTime() / 1000);
    expect(verifySignature(sent!.headers['TDP-Signature'], sent!.body, stored, seconds)).toEqual({
      ok: true,
    });
    expect(sent!.headers['webhook-id']).toBe('legacy');
    expect(new Webhook(standardWebhookSecret(stored)).verify(sent!.body, sent!.headers)).toEqual(
      JSON.parse(sent!.body),
    );
  });
});

/** A real server delivering to a real receiver; each attempt verified with the `standardwebhooks` package. */
describe('Standard Webhooks headers on a delivery', () => {
  let h: Harness;
  let receiver: Server;
  let receiverUrl: string;
  const attempts: { raw: string; headers: IncomingHttpHeaders; answered: number }[] = [];

  beforeAll(async () => {
    h = await startHarness({ runLoops: true, allowInsecureCallbacks: true });
    receiver = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        // The first attempt fails, so the delivery is retried.
        const answered = attempts.length === 0 ? 503 : 204;
        attempts.push({ raw: Buffer.concat(chunks).toString('utf8'), headers: req.headers, answered });
        res.writeHead(answered).end();
      });
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    const address = receiver.address();
    receiverUrl = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}/hook`;
  });
  afterAll(async () => {
    await h?.close();
    await new Promise((resolve) => receiver.close(resolve));
  });

  const standardHeaders = (headers: IncomingHttpHeaders) => ({
    'webhook-id': String(headers['webhook-id']),
    'webhook-timestamp': String(headers['webhook-timestamp']),
    'webhook-signature': String(headers['webhook-signature']),
  });

  it('verifies with Webhook.verify under the secret TDP gave, keeps its webhook-id on a retry, and fails a tampered body', async () => {
    const app = await h.createApplication();
    expect(() => new Webhook(app.callbackSecret)).not.toThrow();
    const published = await h.request('POST', '/v1/workflow-definitions', {
      token: app.apiKey,
      body: {
        name: 'standard-webhooks',
        version: '1',
        inputSchema: { type: 'object', properties: {} },
        steps: [{ key: 'only', capability: 'nobody.offers', capabilityVersion: '1' }],
      },
    });
    expect(published.status, JSON.stringify(published.body)).toBeLessThan(300);
    // No worker offers the workflow's capability: the one callback is the execution's creation.
    const created = await h.request('POST', '/v1/tasks', {
      token: app.apiKey,
      headers: { 'idempotency-key': `sw-${newId()}` },
      body: {
        workflowName: 'standard-webhooks',
        workflowVersion: '1',
        name: 'Standard Webhooks',
        input: {},
        callbackUrl: receiverUrl,
      },
    });
    expect(created.status, JSON.stringify(created.body)).toBeLessThan(300);
    await expect.poll(() => attempts.length, { timeout: 10_000 }).toBe(1);
    // The back-off is counted from when the failure is recorded: advancing the clock before that
    // would schedule the retry past the advanced time, where the test clock never goes.
    const recorded = async () => {
      const log = await h.request('GET', `/v1/tasks/${created.body.task.id}/callbacks`, {
        token: app.apiKey,
      });
      return log.body.items[0]?.status ?? null;
    };
    await expect.poll(recorded, { timeout: 10_000 }).toBe('RETRYING');
    h.clock.advance(5_000); // past the first back-off (2 s plus up to 1 s of jitter)
    await expect.poll(() => attempts.length, { timeout: 10_000 }).toBe(2);

    const [first, retry] = attempts as [(typeof attempts)[0], (typeof attempts)[0]];
    expect([first.answered, retry.answered]).toEqual([503, 204]);
    const webhook = new Webhook(app.callbackSecret);
    for (const attempt of [first, retry]) {
      expect(webhook.verify(attempt.raw, standardHeaders(attempt.headers))).toEqual(JSON.parse(attempt.raw));
      // The deprecated header is still sent, and still verifies.
      const seconds = Number(attempt.headers['webhook-timestamp']);
      expect(
        verifySignature(String(attempt.headers['tdp-signature']), attempt.raw, app.callbackSecret, seconds),
      ).toEqual({ ok: true });
    }
    // The idempotency key a receiver dedupes on: the delivery's id, the same on every attempt.
    const log = await h.request('GET', `/v1/tasks/${created.body.task.id}/callbacks`, { token: app.apiKey });
    expect(first.headers['webhook-id']).toBe(log.body.items[0].id);
    expect(retry.headers['webhook-id']).toBe(first.headers['webhook-id']);
    // The timestamp is each attempt's own send time.
    expect(Number(retry.headers['webhook-timestamp'])).toBeGreaterThanOrEqual(
      Number(first.headers['webhook-timestamp']) + 5,
    );
    const tampered = retry.raw.replace('"sequence":1', '"sequence":2');
    expect(tampered).not.toBe(retry.raw);
    expect(() => webhook.verify(tampered, standardHeaders(retry.headers))).toThrow(/No matching signature/);
    expect(() =>
      new Webhook(`whsec_${Buffer.alloc(32, 7).toString('base64')}`).verify(
        retry.raw,
        standardHeaders(retry.headers),
      ),
    ).toThrow(/No matching signature/);
  });
});

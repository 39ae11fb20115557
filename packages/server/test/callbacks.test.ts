import { verifySignature } from '@tdp/protocol';
import { describe, expect, it } from 'vitest';
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
});

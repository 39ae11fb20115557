/**
 * The callback sender: claims due deliveries (the shared lease mechanism; the queue hands out at most one
 * delivery of an execution at a time, in sequence order), posts each signed with the
 * application's secret (both secrets during a rotation) twice: the Standard Webhooks headers, whose
 * `webhook-id` is the delivery's id so a receiver dedupes its retries, and the deprecated
 * `TDP-Signature`. It records the outcome while the claim is
 * ours. 2xx delivers; 410 and other 4xx except 408/429 are permanent (DEAD at once); anything else
 * retries with back-off plus jitter and goes DEAD after the attempt limit.
 */
import { signatureHeader, signatureHeaderValue, standardWebhookHeaderValues } from '@tdp/protocol';
import { type Clock, noTracing, type TraceContexts, type Tracing } from '../shared/ports.ts';

export interface ClaimedCallback {
  id: string;
  claimId: string;
  attempts: number;
  applicationId: string;
  taskId: string;
  executionId: string;
  url: string;
  payload: Record<string, unknown>;
}

export interface CallbackQueue {
  claim(now: Date, limit: number): Promise<ClaimedCallback[]>;
  delivered(claimId: string, id: string, status: number, now: Date): Promise<void>;
  failed(
    claimId: string,
    id: string,
    attempts: number,
    error: string,
    now: Date,
    jitterMs: number,
  ): Promise<void>;
  dead(claimId: string, id: string, error: string): Promise<void>;
}

export interface CallbackSenderDeps {
  queue: CallbackQueue;
  /** The secrets that sign for an application now (current first). */
  signingSecrets(applicationId: string): Promise<string[]>;
  /**
   * Posts one delivery. It throws when no HTTP answer came; an error with `permanent: true` (an address
   * the egress policy refuses) can never succeed, and the delivery is DEAD at once. The error's message
   * is the delivery's `lastError`, which the application reads.
   */
  post(url: string, body: string, headers: Record<string, string>): Promise<{ status: number }>;
  clock: Clock;
  random?: () => number;
  /** With tracing on: each delivery is a span in its task's trace, its `traceparent` sent as a header. */
  traces?: { tracing: Tracing; contexts: TraceContexts };
  /** Each delivery's end (for its log line), with its trace id when traced. */
  ended?(delivery: ClaimedCallback, outcome: 'DELIVERED' | 'FAILED' | 'DEAD', traceId?: string): void;
}

export function isPermanentFailure(status: number): boolean {
  return status === 410 || (status >= 400 && status < 500 && status !== 408 && status !== 429);
}

export async function sendDueCallbacks(
  deps: CallbackSenderDeps,
  limit: number,
): Promise<{ claimed: number; delivered: number; failed: number; dead: number }> {
  const batch = await deps.queue.claim(deps.clock.now(), limit);
  const report = { claimed: batch.length, delivered: 0, failed: 0, dead: 0 };
  const tracing = deps.traces?.tracing ?? noTracing;
  const parents = deps.traces
    ? await deps.traces.contexts.ofExecutions([...new Set(batch.map((d) => d.executionId))])
    : new Map<string, string>();
  const deliver = (delivery: ClaimedCallback) =>
    tracing.inSpan(
      'tdp.callback.deliver',
      {
        kind: 'client',
        parent: parents.get(delivery.executionId) ?? null,
        attributes: { taskId: delivery.taskId, executionId: delivery.executionId, outboxId: delivery.id },
      },
      () => deliverOne(deps, delivery, tracing.traceparent(), report),
    );
  await Promise.all(batch.map(deliver));
  return report;
}

async function deliverOne(
  deps: CallbackSenderDeps,
  delivery: ClaimedCallback,
  traceparent: string | undefined,
  report: { delivered: number; failed: number; dead: number },
): Promise<void> {
  const outcome = await deliverAndRecord(deps, delivery, traceparent);
  report[outcome === 'DELIVERED' ? 'delivered' : outcome === 'DEAD' ? 'dead' : 'failed'] += 1;
  deps.ended?.(delivery, outcome, traceparent?.split('-')[1]);
}

async function deliverAndRecord(
  deps: CallbackSenderDeps,
  delivery: ClaimedCallback,
  traceparent: string | undefined,
): Promise<'DELIVERED' | 'FAILED' | 'DEAD'> {
  const body = JSON.stringify(delivery.payload);
  const timestamp = Math.floor(deps.clock.now().getTime() / 1000);
  try {
    const secrets = await deps.signingSecrets(delivery.applicationId);
    const response = await deps.post(delivery.url, body, {
      'content-type': 'application/json',
      'user-agent': 'tdp-callbacks/1',
      ...standardWebhookHeaderValues(delivery.id, secrets, timestamp, body),
      [signatureHeader]: signatureHeaderValue(secrets, timestamp, body),
      ...(traceparent ? { traceparent } : {}),
    });
    if (response.status >= 200 && response.status < 300) {
      await deps.queue.delivered(delivery.claimId, delivery.id, response.status, deps.clock.now());
      return 'DELIVERED';
    }
    if (isPermanentFailure(response.status)) {
      await deps.queue.dead(delivery.claimId, delivery.id, `HTTP ${response.status}`);
      return 'DEAD';
    }
    await deps.queue.failed(
      delivery.claimId,
      delivery.id,
      delivery.attempts,
      `HTTP ${response.status}`,
      deps.clock.now(),
      jitter(deps),
    );
    return 'FAILED';
  } catch (error) {
    const message = (error as Error).message.slice(0, 500);
    if ((error as { permanent?: boolean }).permanent) {
      await deps.queue.dead(delivery.claimId, delivery.id, message);
      return 'DEAD';
    }
    await deps.queue.failed(
      delivery.claimId,
      delivery.id,
      delivery.attempts,
      message,
      deps.clock.now(),
      jitter(deps),
    );
    return 'FAILED';
  }
}

const jitter = (deps: CallbackSenderDeps) => Math.floor((deps.random ?? Math.random)() * 1000);

/**
 * The relay's publishers: the gateway running in this process, or any Centrifugo-compatible server API
 * (TDP's own gateway run as `tdp gateway`, or Centrifugo) reached over HTTP with one batch per round.
 */
import type { PublishOutcome, RealtimeMessage, RealtimePublisher } from '../../../core/realtime/relay.ts';

/** The in-process gateway; messages are published in order. */
export function gatewayPublisher(gateway: {
  publish(channel: string, data: unknown, options: { idempotencyKey?: string }): Promise<unknown>;
}): RealtimePublisher {
  return {
    publish: async (messages) => {
      const settled = await Promise.allSettled(
        messages.map((m) => gateway.publish(m.channel, m.data, m.id ? { idempotencyKey: m.id } : {})),
      );
      return settled.map((s) =>
        s.status === 'fulfilled'
          ? { ok: true }
          : { ok: false, permanent: false, error: (s.reason as Error)?.message ?? String(s.reason) },
      );
    },
  };
}

/** API errors worth retrying: internal (100) and not available (108), or any marked temporary. */
const temporaryCodes = new Set([100, 108]);

/**
 * Centrifugo's server API: `POST <apiUrl>/batch` with `X-API-Key`, the publications in order, each with
 * its message id as `idempotency_key` (a batch sent again publishes nothing twice). A broken connection
 * is tried once more at once; a timeout, a network error, 408, 429 or a 5xx is transient for the whole
 * batch; any other HTTP status is
 * permanent (the key, the URL or the request is wrong); an error in one reply concerns that message.
 */
export class CentrifugoApiPublisher implements RealtimePublisher {
  constructor(
    private readonly apiUrl: string,
    private readonly apiKey: string,
    private readonly timeoutMs = 5_000,
  ) {}

  async publish(messages: RealtimeMessage[]): Promise<PublishOutcome[]> {
    const all = (outcome: PublishOutcome) => messages.map(() => outcome);
    const request = JSON.stringify({
      commands: messages.map((m) => ({
        publish: { channel: m.channel, data: m.data, ...(m.id ? { idempotency_key: m.id } : {}) },
      })),
    });
    let response: Response;
    try {
      response = await this.post(request).catch((error: Error) => {
        // A connection that broke (refused or reset: a node gone behind a load balancer) is tried once
        // more on a new one, which the balancer gives a node still up; the message ids make a repeat
        // harmless. A timeout is not: a hung API would only hold the caller twice as long.
        if (error.name === 'TimeoutError') throw error;
        return this.post(request);
      });
    } catch (error) {
      return all({
        ok: false,
        permanent: false,
        error: `realtime API unreachable: ${(error as Error).message}`,
      });
    }
    if (response.status !== 200) {
      await response.body?.cancel();
      const transient = response.status === 408 || response.status === 429 || response.status >= 500;
      return all({
        ok: false,
        permanent: !transient,
        error: `realtime API answered HTTP ${response.status}`,
      });
    }
    type Replies = ({ error?: { code: number; message: string; temporary?: boolean } } & Record<
      string,
      unknown
    >)[];
    const body = (await response.json().catch(() => null)) as {
      replies?: Replies;
      result?: { replies?: Replies };
      error?: { code: number; message: string; temporary?: boolean };
    } | null;
    // Centrifugo answers a batch with bare `replies`; accept them wrapped in `result` too.
    const replies = body?.replies ?? body?.result?.replies;
    const refusal = (error: { code: number; message: string; temporary?: boolean }): PublishOutcome => ({
      ok: false,
      permanent: !(error.temporary || temporaryCodes.has(error.code)),
      error: `realtime API error ${error.code}: ${error.message}`,
    });
    if (body?.error) return all(refusal(body.error));
    if (!Array.isArray(replies))
      return all({ ok: false, permanent: false, error: 'realtime API answered without replies' });
    return messages.map((_, index) => {
      const reply = replies[index];
      if (!reply) return { ok: false, permanent: false, error: 'realtime API answered too few replies' };
      return reply.error ? refusal(reply.error) : { ok: true };
    });
  }

  private post(body: string): Promise<Response> {
    return fetch(`${this.apiUrl.replace(/\/$/, '')}/batch`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': this.apiKey },
      body,
      signal: AbortSignal.timeout(this.timeoutMs),
    });
  }
}

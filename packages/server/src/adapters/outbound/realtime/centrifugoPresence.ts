/**
 * Which detail channels a connection is still in, from Centrifugo's presence (server API `presence`, in
 * one `batch`); the `task_detail` namespace has presence on. Used only when a connection reaches its
 * detail limit, to release the leases of details it has left.
 */
import type { SubscriptionPresence } from '../../../core/realtime/detailLeases.ts';

export class CentrifugoPresence implements SubscriptionPresence {
  constructor(
    private readonly apiUrl: string,
    private readonly apiKey: string,
    private readonly timeoutMs = 2_000,
  ) {}

  async subscribed(clientId: string, channels: string[]): Promise<Set<string> | null> {
    if (channels.length === 0) return new Set();
    type Reply = { error?: unknown; presence?: { presence?: Record<string, unknown> } };
    try {
      const response = await fetch(`${this.apiUrl.replace(/\/$/, '')}/batch`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': this.apiKey },
        body: JSON.stringify({ commands: channels.map((channel) => ({ presence: { channel } })) }),
        signal: AbortSignal.timeout(this.timeoutMs),
      });
      if (response.status !== 200) {
        await response.body?.cancel();
        return null;
      }
      const body = (await response.json()) as { replies?: Reply[]; result?: { replies?: Reply[] } };
      const replies = body.replies ?? body.result?.replies;
      if (!Array.isArray(replies) || replies.length !== channels.length) return null;
      const present = new Set<string>();
      for (const [index, reply] of replies.entries()) {
        // Presence off or failing for a channel: nothing is known, so nothing is released.
        if (reply.error || !reply.presence) return null;
        if (reply.presence.presence && clientId in reply.presence.presence) present.add(channels[index]!);
      }
      return present;
    } catch {
      return null;
    }
  }
}

/**
 * The Temporal bridge's backlog, read from JetStream (the health page; docs/temporal.md): how many
 * events its durable consumer has not been given yet, how many it holds unacked, and how long the oldest
 * of them has waited. Before the bridge first ran (Temporal never answered), there is no consumer: then
 * every event in the stream waits. No Temporal SDK here: the page reads this in any replica.
 */
import type { JetStreamManager } from 'nats';
import type { EngineBridgeBacklog, EngineBridgeReads } from '../../core/operations/ports.ts';
import { bridgeConsumer } from './temporalBridge.ts';

export class JetStreamBridgeBacklog implements EngineBridgeReads {
  constructor(
    private readonly manager: () => Promise<JetStreamManager>,
    private readonly stream: string,
    /** This replica's engine: connected or not; null when it runs none. */
    private readonly connected: () => boolean | null,
  ) {}

  async backlog(now: Date): Promise<EngineBridgeBacklog> {
    const connected = this.connected();
    try {
      const manager = await this.manager();
      const consumer = await manager.consumers.info(this.stream, bridgeConsumer).catch((error: unknown) => {
        if (isNotFound(error)) return null;
        throw error;
      });
      if (!consumer) {
        const { state } = await manager.streams.info(this.stream);
        const since = state.messages > 0 ? Date.parse(state.first_ts) : Number.NaN;
        return { pending: state.messages, unacked: 0, oldestAgeMs: ageMs(now, since), connected };
      }
      const pending = consumer.num_pending;
      const unacked = consumer.num_ack_pending;
      let oldestAgeMs: number | null = null;
      if (pending + unacked > 0) {
        // The first message past the ack floor is the oldest the bridge has not finished.
        const oldest = await manager.streams
          .getMessage(this.stream, { seq: consumer.ack_floor.stream_seq + 1 })
          .catch(() => null);
        oldestAgeMs = oldest ? ageMs(now, oldest.time.getTime()) : null;
      }
      return { pending, unacked, oldestAgeMs, connected };
    } catch {
      return { pending: null, unacked: null, oldestAgeMs: null, connected };
    }
  }
}

const ageMs = (now: Date, since: number) => (Number.isNaN(since) ? null : Math.max(0, now.getTime() - since));

/** JetStream's "consumer not found" (API error 10014), or a stream not made yet (10059). */
function isNotFound(error: unknown): boolean {
  const code = (error as { api_error?: { err_code?: number } }).api_error?.err_code;
  return code === 10014 || code === 10059 || /not found/i.test(String((error as Error).message));
}

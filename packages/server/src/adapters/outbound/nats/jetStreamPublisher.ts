import { connect, type JetStreamClient, type JetStreamManager, type NatsConnection, nanos } from 'nats';
import type { DomainEvent, EventPublisher } from '../../../core/outbox/ports.ts';

export interface JetStreamOptions {
  url: string;
  stream?: string;
  /** First subject token; `tdp` unless several deployments share one NATS. */
  subjectPrefix?: string;
  /** JetStream drops a message whose id it saw within this window. */
  duplicateWindowMs?: number;
  publishTimeoutMs?: number;
}

/** `tdp.<tenant>.<application>.events.<type>`; dots in the type become subject levels (execution.created). */
export function subjectFor(
  event: Pick<DomainEvent, 'tenantId' | 'applicationId' | 'type'>,
  prefix = 'tdp',
): string {
  return `${prefix}.${event.tenantId}.${event.applicationId}.events.${event.type}`;
}

/**
 * Publishes domain events to NATS JetStream. The message id is the event id, so a re-publication after a
 * crash or lease takeover is dropped by JetStream inside its duplicate window.
 */
export class JetStreamPublisher implements EventPublisher {
  private constructor(
    private readonly connection: NatsConnection,
    private readonly jetstream: JetStreamClient,
    private readonly timeoutMs: number,
    private readonly subjectPrefix: string,
  ) {}

  static async connect(options: JetStreamOptions): Promise<JetStreamPublisher> {
    const connection = await connect({ servers: options.url, name: 'tdp-outbox', maxReconnectAttempts: -1 });
    try {
      const stream = options.stream ?? 'TDP_EVENTS';
      const manager = await connection.jetstreamManager();
      try {
        await manager.streams.info(stream);
      } catch {
        await manager.streams.add({
          name: stream,
          subjects: [`${options.subjectPrefix ?? 'tdp'}.*.*.events.>`],
          duplicate_window: nanos(options.duplicateWindowMs ?? 120_000),
        });
      }
      return new JetStreamPublisher(
        connection,
        connection.jetstream(),
        options.publishTimeoutMs ?? 5_000,
        options.subjectPrefix ?? 'tdp',
      );
    } catch (error) {
      await connection.close();
      throw error;
    }
  }

  async publish(event: DomainEvent): Promise<void> {
    await this.jetstream.publish(subjectFor(event, this.subjectPrefix), JSON.stringify(event.payload), {
      msgID: event.id,
      timeout: this.timeoutMs,
    });
  }

  /** JetStream's management API on this connection (the bridge's backlog is read through it). */
  manager(): Promise<JetStreamManager> {
    return this.connection.jetstreamManager();
  }

  async close(): Promise<void> {
    await this.connection.drain();
  }
}

import type { DomainEvent, EventPublisher } from '../../../core/outbox/ports.ts';

export type EventHandler = (event: DomainEvent) => Promise<void> | void;

/**
 * The default event bus: subscribers in this process. Publishing waits for every handler, so a failing
 * handler fails the publication and the outbox retries it; handlers must therefore be idempotent by id.
 */
export class InProcessBus implements EventPublisher {
  private readonly handlers = new Set<EventHandler>();

  subscribe(handler: EventHandler): () => void {
    this.handlers.add(handler);
    return () => this.handlers.delete(handler);
  }

  async publish(event: DomainEvent): Promise<void> {
    for (const handler of this.handlers) await handler(event);
  }
}

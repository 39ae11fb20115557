/**
 * Revocations heard by every replica at once: the replica that revokes applies it to itself, then sends
 * one NOTIFY on `tdp_revocations`; the others LISTEN and apply it too (drop the credential from their
 * caches, end its streams, drop the task from their watch sets). A replica that misses a NOTIFY (its
 * LISTEN connection was down) still catches up: its credential caches expire within seconds.
 */
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { Revocation, Revocations } from '../../../core/identity/ports.ts';
import { type Sql, stopListening } from './database.ts';

export const revocationChannel = 'tdp_revocations';

type Listener = (revocation: Revocation, here: boolean) => void;

export class PostgresRevocations implements Revocations {
  /** Tells this process's own NOTIFYs (which PostgreSQL delivers back to it) from the others'. */
  private readonly origin = randomUUID();
  private readonly listeners: Listener[] = [];
  private unlisten: (() => Promise<void>) | null = null;

  constructor(
    private readonly sql: Sql,
    private readonly logger: Logger,
  ) {}

  /** Starts listening to the other replicas. */
  async start(): Promise<void> {
    const listening = await this.sql.listen(revocationChannel, (payload) => {
      try {
        const { origin, revocation } = JSON.parse(payload) as { origin: string; revocation: Revocation };
        if (origin !== this.origin) this.apply(revocation, false);
      } catch (error) {
        this.logger.warn({ err: error }, 'unreadable revocation notification');
      }
    });
    this.unlisten = listening.unlisten;
  }

  async stop(): Promise<void> {
    await stopListening(this.unlisten ?? undefined);
  }

  async announce(revocation: Revocation): Promise<void> {
    this.apply(revocation, true);
    // The revocation is committed already: a lost NOTIFY leaves the others to their caches' expiry.
    await this.sql
      .notify(revocationChannel, JSON.stringify({ origin: this.origin, revocation }))
      .catch((error) =>
        this.logger.warn({ err: error }, 'could not tell the other replicas of a revocation'),
      );
  }

  subscribe(listener: Listener): void {
    this.listeners.push(listener);
  }

  private apply(revocation: Revocation, here: boolean): void {
    for (const listener of this.listeners) {
      try {
        listener(revocation, here);
      } catch (error) {
        this.logger.warn({ err: error, revocation: revocation.kind }, 'a revocation listener failed');
      }
    }
  }
}

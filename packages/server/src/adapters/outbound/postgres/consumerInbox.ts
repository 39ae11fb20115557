import { type Sql, type TxSql, transaction } from './database.ts';

/**
 * Applies an event's effect at most once per consumer: the inbox row and the effect commit together,
 * so a redelivered event (same id) finds the row and is skipped. Returns whether the effect ran.
 */
export async function consumeOnce(
  sql: Sql,
  consumer: string,
  eventId: string,
  now: Date,
  effect: (tx: TxSql) => Promise<void>,
): Promise<boolean> {
  return (await transaction(sql, async (tx) => {
    const [fresh] = await tx`
      INSERT INTO consumer_inbox (consumer, event_id, processed_at) VALUES (${consumer}, ${eventId}, ${now})
      ON CONFLICT DO NOTHING RETURNING 1`;
    if (!fresh) return false;
    await effect(tx);
    return true;
  })) as boolean;
}

/**
 * Records that `consumer` handled an event, for an effect made outside the database (a call to another
 * system that is safe to repeat): the consumer looks the row up first and skips a recorded event.
 */
export async function recordConsumed(sql: Sql, consumer: string, eventId: string, now: Date): Promise<void> {
  await sql`
    INSERT INTO consumer_inbox (consumer, event_id, processed_at) VALUES (${consumer}, ${eventId}, ${now})
    ON CONFLICT DO NOTHING`;
}

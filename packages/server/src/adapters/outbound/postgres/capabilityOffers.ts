import type { CapabilityOffers } from '../../../core/definitions/publishWarnings.ts';
import type { Sql } from './database.ts';

/** The capabilities (name and version) the live worker sessions offer. */
export class PostgresCapabilityOffers implements CapabilityOffers {
  constructor(private readonly sql: Sql) {}

  async offered() {
    return this.sql<{ name: string; version: string }[]>`
      SELECT DISTINCT c.name, c.version
      FROM worker w, jsonb_to_recordset(w.capabilities) AS c(name text, version text)
      WHERE w.ended_at IS NULL`;
  }
}

/**
 * The operator's requeue of DEAD rows in the three outbox-like tables: the rows chosen (by id, or by a
 * filter) go back to be sent now, with the reset `POST /v1/callbacks/{id}:redeliver` gives one row, and
 * the audit record (with the ids requeued) is written in the same transaction.
 */
import type { DeadLetterSelection, DeadLetters, DeadLetterTable } from '../../../core/operations/ports.ts';
import type { OperatorAuditRecord } from '../../../core/workers/ports.ts';
import { type Sql, transaction } from './database.ts';
import { insertAudit } from './operatorStore.ts';

const tables: Record<DeadLetterTable, 'outbox_event' | 'realtime_outbox' | 'callback_delivery'> = {
  outbox: 'outbox_event',
  realtime: 'realtime_outbox',
  callbacks: 'callback_delivery',
};

export class PostgresDeadLetters implements DeadLetters {
  constructor(private readonly sql: Sql) {}

  async requeueDead(
    table: DeadLetterTable,
    selection: DeadLetterSelection,
    limit: number,
    audit: OperatorAuditRecord,
    now: Date,
  ): Promise<string[]> {
    const name = this.sql(tables[table]);
    const ids = selection.ids ?? null;
    const f = selection.filter ?? {};
    // A realtime row names no application: the tasks of its messages do.
    const ofApplication =
      table === 'realtime'
        ? this.sql`EXISTS (
            SELECT 1 FROM jsonb_to_recordset(messages) AS m(aggregate_type text, aggregate_id uuid)
            WHERE m.aggregate_type = 'TASK'
              AND m.aggregate_id IN (SELECT id FROM task WHERE application_id = ${f.applicationId ?? null}))`
        : this.sql`application_id = ${f.applicationId ?? null}`;
    return transaction(this.sql, async (tx) => {
      const requeued = await tx<{ id: string }[]>`
        UPDATE ${name} SET status = 'PENDING', attempts = 0, available_at = ${now}, last_error = NULL,
               claim_id = NULL, claim_expires_at = NULL
        WHERE id IN (
          SELECT id FROM ${name}
          WHERE status = 'DEAD'
            AND (${ids === null} OR id = ANY(${ids ?? []}::uuid[]))
            AND (${f.createdFrom ?? null}::timestamptz IS NULL OR created_at >= ${f.createdFrom ?? null})
            AND (${f.createdTo ?? null}::timestamptz IS NULL OR created_at < ${f.createdTo ?? null})
            AND (${f.errorContains ?? null}::text IS NULL
                 OR strpos(lower(coalesce(last_error, '')), lower(${f.errorContains ?? null})) > 0)
            AND (${f.applicationId ?? null}::uuid IS NULL OR ${ofApplication})
          ORDER BY created_at, id LIMIT ${limit}
          FOR UPDATE
        )
        RETURNING id`;
      const requeuedIds = requeued.map((r) => r.id);
      await insertAudit(tx, { ...audit, details: { ...audit.details, requeued: requeuedIds } });
      return requeuedIds;
    });
  }
}

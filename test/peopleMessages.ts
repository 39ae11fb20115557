/**
 * Messages for people (docs/errors.md), checked over everything the suite writes: every test database is
 * scanned when it is dropped (test/database.ts) and, at the end of the run, every one left undropped
 * (test/globalSetup.ts). A `userMessage` anywhere in any JSON column of any table — failures, step errors,
 * events, callback payloads, realtime rows and their notices, stored replies — and the demo app's failure
 * messages must be fit for people: no JSON, no `urn:`, no internal path, no HTTP status, no stack, no URL.
 */
import { unfitForPeople, userMessageMaxLength } from '../packages/protocol/src/index.ts';
import type { Sql } from '../packages/server/src/adapters/outbound/postgres/database.ts';

/** Where messages for people are stored as plain text (schema.table.column). */
const textColumns = ['demo.processing_order.failure_message'];

const quote = (name: string) => `"${name.replaceAll('"', '""')}"`;

/** Each message for people stored in the database that is not fit for them, with where it is and why. */
export async function unfitUserMessages(sql: Sql): Promise<{ found: number; unfit: string[] }> {
  const columns = await sql<{ schema: string; table: string; column: string; type: string }[]>`
    SELECT c.table_schema AS schema, c.table_name AS table, c.column_name AS column, c.data_type AS type
    FROM information_schema.columns c
    JOIN information_schema.tables t ON t.table_schema = c.table_schema AND t.table_name = c.table_name
    WHERE c.table_schema NOT IN ('pg_catalog', 'information_schema') AND t.table_type = 'BASE TABLE'
      AND (c.data_type = 'jsonb' OR c.table_schema || '.' || c.table_name || '.' || c.column_name = ANY(${textColumns}))`;
  const messages: { where: string; message: string; notice: boolean }[] = [];
  for (const { schema, table, column, type } of columns) {
    const where = `${schema}.${table}.${column}`;
    const rows =
      type === 'jsonb'
        ? await sql.unsafe<{ message: string; notice: boolean }[]>(
            `SELECT DISTINCT m #>> '{}' AS message, false AS notice
             FROM ${quote(schema)}.${quote(table)} t,
               jsonb_path_query(t.${quote(column)}, 'strict $.**.userMessage') m
             WHERE jsonb_typeof(m) = 'string'
             UNION
             SELECT DISTINCT m #>> '{}', true
             FROM ${quote(schema)}.${quote(table)} t,
               jsonb_path_query(t.${quote(column)}, 'strict $.**.notice.message') m
             WHERE jsonb_typeof(m) = 'string'`,
          )
        : await sql.unsafe<{ message: string; notice: boolean }[]>(
            `SELECT DISTINCT ${quote(column)} AS message, false AS notice FROM ${quote(schema)}.${quote(table)}
             WHERE ${quote(column)} IS NOT NULL`,
          );
    for (const row of rows) messages.push({ where, ...row });
  }
  const unfit = messages.flatMap(({ where, message, notice }) => {
    // A notice is the task's own name before the message; a userMessage alone is length-limited.
    const why =
      unfitForPeople(message) ??
      (!notice && message.length > userMessageMaxLength
        ? `more than ${userMessageMaxLength} characters`
        : null);
    return why ? [`${where}: ${why} in ${JSON.stringify(message.slice(0, 300))}`] : [];
  });
  return { found: messages.length, unfit };
}

/**
 * Multi-row statements: a batch of facts writes each table with one INSERT or UPDATE whose rows travel
 * as a single jsonb parameter, unpacked by `jsonb_to_recordset`. One statement for fifty rows costs
 * PostgreSQL about what one statement for one row does.
 */
import type { TxSql } from './database.ts';

/** A column of a multi-row statement: its name and its PostgreSQL type. */
export type Column = readonly [name: string, type: string];

/** Row values as jsonb_to_recordset reads them: bigints as strings, bytea as `\x…` hex. */
export type RowValue = string | number | boolean | bigint | Date | Buffer | null | object;

function encodeRows(rows: Record<string, RowValue>[]): string {
  return JSON.stringify(rows, function (key, value) {
    if (typeof value === 'bigint') return value.toString();
    // Buffer.toJSON runs before this replacer; read the original from the holder.
    const original = (this as Record<string, unknown>)[key];
    if (Buffer.isBuffer(original)) return `\\x${original.toString('hex')}`;
    return value;
  });
}

const recordset = (columns: readonly Column[]) =>
  `jsonb_to_recordset($1::text::jsonb) AS x(${columns.map(([name, type]) => `${name} ${type}`).join(', ')})`;

/** One INSERT for all `rows`, in their order; `suffix` is e.g. an ON CONFLICT clause. */
export function insertRows(
  sql: TxSql,
  table: string,
  columns: readonly Column[],
  rows: Record<string, RowValue>[],
  suffix = '',
) {
  const names = columns.map(([name]) => name).join(', ');
  return sql.unsafe(
    `INSERT INTO ${table} (${names}) SELECT ${names} FROM ${recordset(columns)} ${suffix}`,
    [encodeRows(rows)],
    { prepare: true },
  );
}

/** One UPDATE for all `rows`, matched on `id` (the first column); each id must appear once. */
export function updateRows(
  sql: TxSql,
  table: string,
  columns: readonly Column[],
  rows: Record<string, RowValue>[],
) {
  const assignments = columns
    .filter(([name]) => name !== 'id')
    .map(([name]) => `${name} = x.${name}`)
    .join(', ');
  return sql.unsafe(
    `UPDATE ${table} SET ${assignments} FROM ${recordset(columns)} WHERE ${table}.id = x.id`,
    [encodeRows(rows)],
    { prepare: true },
  );
}

/**
 * Multi-row statements: a batch of facts writes each table with one INSERT or UPDATE whose rows travel
 * as a single jsonb parameter, unpacked by `jsonb_to_recordset`. One statement for fifty rows costs
 * PostgreSQL about what one statement for one row does.
 */
import type { Queryable } from './database.ts';

/** A column of a multi-row statement: its name and its PostgreSQL type. */
export type Column = readonly [name: string, type: string];

/** Row values as jsonb_to_recordset reads them: bigints as strings, bytea as `\x…` hex. */
export type RowValue = string | number | boolean | bigint | Date | Buffer | null | object;

/**
 * The statement's columns of each row, as JSON: bigints as strings, Buffers as `\x…` hex; nested values
 * are JSON documents already and pass through as they are. Only the statement's columns: a row object
 * carries every column of its table (an execution its frozen definition, a task its input), and an
 * UPDATE of a few of them should not serialize the rest. No JSON replacer either (a JavaScript call
 * per value: it made this 5% of the server's CPU).
 */
function encodeRows(rows: Record<string, RowValue>[], columns: readonly Column[]): string {
  const plain = rows.map((row) => {
    const picked: Record<string, RowValue> = {};
    for (const [name] of columns) {
      const value = row[name];
      if (value === undefined) continue;
      picked[name] =
        typeof value === 'bigint'
          ? value.toString()
          : Buffer.isBuffer(value)
            ? `\\x${value.toString('hex')}`
            : value;
    }
    return picked;
  });
  return JSON.stringify(plain);
}

const recordset = (columns: readonly Column[]) =>
  `jsonb_to_recordset($1::text::jsonb) AS x(${columns.map(([name, type]) => `${name} ${type}`).join(', ')})`;

/**
 * Statement texts by their column list (a module constant at every call site) and the rest of what
 * shapes them. A text is built once: rebuilding it per call was a tenth of the server's allocations.
 */
const texts = new WeakMap<readonly Column[], Map<string, string>>();

function cachedText(columns: readonly Column[], key: string, build: () => string): string {
  let byKey = texts.get(columns);
  if (!byKey) {
    byKey = new Map();
    texts.set(columns, byKey);
  }
  let text = byKey.get(key);
  if (text === undefined) {
    text = build();
    byKey.set(key, text);
  }
  return text;
}

/** A statement whose rows travel as its only parameter, `$1` (a JSON text). */
export interface RowStatement {
  text: string;
  rows: string;
}

/** INSERT of all `rows`, in their order; `suffix` is e.g. an ON CONFLICT clause. */
export function insertStatement(
  table: string,
  columns: readonly Column[],
  rows: Record<string, RowValue>[],
  suffix = '',
): RowStatement {
  const text = cachedText(columns, `${table} ${suffix}`, () => {
    const names = columns.map(([name]) => name).join(', ');
    return `INSERT INTO ${table} (${names}) SELECT ${names} FROM ${recordset(columns)} ${suffix}`;
  });
  return { text, rows: encodeRows(rows, columns) };
}

/**
 * UPDATE of the rows matched on `match` (each value once). By default every other column is set from
 * the row; `assignments` and `where` replace the SET list and add a condition (`x` is the row).
 */
export function updateStatement(
  table: string,
  columns: readonly Column[],
  rows: Record<string, RowValue>[],
  options: { match?: string; assignments?: string; where?: string } = {},
): RowStatement {
  const key = `${table} ${options.match ?? ''} ${options.assignments ?? ''} ${options.where ?? ''}`;
  const text = cachedText(columns, key, () => {
    const match = options.match ?? 'id';
    const assignments =
      options.assignments ??
      columns
        .filter(([name]) => name !== match)
        .map(([name]) => `${name} = x.${name}`)
        .join(', ');
    const where = options.where ? ` AND ${options.where}` : '';
    // The planner takes a function's rows to be 100 and, against a table of a few thousand rows, would
    // scan all of it for a hash join; the keys as an array (an init plan) make it look them up by index.
    // The rows are unpacked once, into a materialized CTE both read: unpacking them a second time for
    // the keys parsed the whole parameter again (a fifth of the statement for a batch of steps).
    const byIndex = `${table}.${match} = ANY(ARRAY(SELECT y.${match} FROM x AS y))`;
    return `WITH x AS MATERIALIZED (SELECT * FROM ${recordset(columns)}) UPDATE ${table} SET ${assignments} FROM x WHERE ${byIndex} AND ${table}.${match} = x.${match}${where}`;
  });
  return { text, rows: encodeRows(rows, columns) };
}

/** Runs one statement. */
export function run(sql: Queryable, statement: RowStatement) {
  return sql.unsafe(statement.text, [statement.rows], { prepare: true });
}

/**
 * Runs several statements as one: each becomes a data-modifying CTE of a single statement, so they go
 * out as one message and, outside a transaction, commit atomically on their own. They all see the
 * snapshot from before the statement, so no two may touch the same row (mergeWrites sees to that);
 * foreign keys are checked at the end of the statement, so a row may reference one inserted beside it.
 */
export function runAll(sql: Queryable, statements: RowStatement[]) {
  if (statements.length === 1) return run(sql, statements[0]!);
  return sql.unsafe(
    combinedText(statements),
    statements.map((s) => s.rows),
    { prepare: true },
  );
}

/** Each statement text's number, and the combined texts by their statements' numbers ("3,0,7"). */
const textNumbers = new Map<string, number>();
const combinedTexts = new Map<string, string>();

/** The texts are a bounded set (built from constants), and so are their combinations. */
function combinedText(statements: RowStatement[]): string {
  let key = '';
  for (const { text } of statements) {
    let number = textNumbers.get(text);
    if (number === undefined) {
      number = textNumbers.size;
      textNumbers.set(text, number);
    }
    key += `${number},`;
  }
  let combined = combinedTexts.get(key);
  if (combined === undefined) {
    combined = `WITH ${statements
      .map((s, i) => `s${i} AS (${s.text.replace(/\$1\b/g, `$${i + 1}`)})`)
      .join(', ')} SELECT 1`;
    combinedTexts.set(key, combined);
  }
  return combined;
}

/** One INSERT for all `rows`, in their order; `suffix` is e.g. an ON CONFLICT clause. */
export function insertRows(
  sql: Queryable,
  table: string,
  columns: readonly Column[],
  rows: Record<string, RowValue>[],
  suffix = '',
) {
  return run(sql, insertStatement(table, columns, rows, suffix));
}

/** One UPDATE for all `rows`, matched on `id` (the first column); each id must appear once. */
export function updateRows(
  sql: Queryable,
  table: string,
  columns: readonly Column[],
  rows: Record<string, RowValue>[],
) {
  return run(sql, updateStatement(table, columns, rows));
}

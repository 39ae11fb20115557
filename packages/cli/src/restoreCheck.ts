/**
 * What a restored database holds, to compare with what it held at the chosen time: its TDP schema
 * version, the rows of every table, and where each outbox stands (what waits to be sent again).
 */
import type { connectDatabase } from '@tdp/server';

type Sql = ReturnType<typeof connectDatabase>;

export interface OutboxPosition {
  table: string;
  /** PENDING, FAILED or PUBLISHING: sent (again) once a server runs on the restored database. */
  waiting: number;
  published: number;
  dead: number;
  lastWrittenAt: string | null;
  lastPublishedAt: string | null;
}

export interface RestoreCheck {
  /** The commit time of the last transaction recovery replayed: the restored moment. */
  lastTransactionAt: string | null;
  schema: { version: number | null; name: string | null; appliedAt: string | null };
  tables: Record<string, number>;
  outboxes: OutboxPosition[];
}

const identifier = (name: string) => `"${name.replaceAll('"', '""')}"`;
const iso = (value: Date | null) => (value ? value.toISOString() : null);

export async function checkRestored(sql: Sql): Promise<RestoreCheck> {
  const [replayed] = await sql<{ at: Date | null }[]>`SELECT pg_last_xact_replay_timestamp() AS at`;
  const [schema] = await sql<{ version: number; name: string; appliedAt: Date }[]>`
    SELECT version, name, applied_at AS "appliedAt" FROM schema_migration ORDER BY version DESC LIMIT 1`.catch(
    () => [],
  );
  // Every table of the public schema (a partitioned table counts its partitions once, as itself).
  const names = await sql<{ name: string }[]>`
    SELECT c.relname AS name FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') AND NOT c.relispartition ORDER BY c.relname`;
  const tables: Record<string, number> = {};
  for (const { name } of names) {
    const [row] = await sql.unsafe<{ n: bigint }[]>(`SELECT count(*) AS n FROM ${identifier(name)}`);
    tables[name] = Number(row?.n ?? 0);
  }
  // An outbox is any table on the shared claim mechanism (outboxQueue.ts): status, claim and sent time.
  const outboxTables = await sql<{ name: string }[]>`
    SELECT table_name AS name FROM information_schema.columns
    WHERE table_schema = 'public' AND column_name IN ('status', 'claim_id', 'published_at', 'created_at')
    GROUP BY table_name HAVING count(*) = 4 ORDER BY table_name`;
  const outboxes: OutboxPosition[] = [];
  for (const { name } of outboxTables) {
    const [row] = await sql.unsafe<
      { waiting: bigint; published: bigint; dead: bigint; written: Date | null; sent: Date | null }[]
    >(`SELECT count(*) FILTER (WHERE status IN ('PENDING', 'FAILED', 'PUBLISHING')) AS waiting,
              count(*) FILTER (WHERE status = 'PUBLISHED') AS published,
              count(*) FILTER (WHERE status = 'DEAD') AS dead,
              max(created_at) AS written, max(published_at) AS sent
       FROM ${identifier(name)}`);
    outboxes.push({
      table: name,
      waiting: Number(row?.waiting ?? 0),
      published: Number(row?.published ?? 0),
      dead: Number(row?.dead ?? 0),
      lastWrittenAt: iso(row?.written ?? null),
      lastPublishedAt: iso(row?.sent ?? null),
    });
  }
  return {
    lastTransactionAt: iso(replayed?.at ?? null),
    schema: {
      version: schema?.version ?? null,
      name: schema?.name ?? null,
      appliedAt: iso(schema?.appliedAt ?? null),
    },
    tables,
    outboxes,
  };
}

/** The check as aligned text, for people. */
export function formatCheck(check: RestoreCheck, needed: { version: number; name: string }): string {
  const lines = [
    `last transaction replayed: ${check.lastTransactionAt ?? 'none after the backup'}`,
    `schema version: ${check.schema.version ?? 'none'}${check.schema.name ? ` (${check.schema.name})` : ''}, ` +
      `this TDP needs ${needed.version} (${needed.name})`,
    '',
  ];
  const width = Math.max(5, ...Object.keys(check.tables).map((name) => name.length));
  lines.push(`${'table'.padEnd(width)}  rows`);
  for (const [name, rows] of Object.entries(check.tables)) lines.push(`${name.padEnd(width)}  ${rows}`);
  lines.push('', `${'outbox'.padEnd(width)}  waiting  published  dead  last written              last sent`);
  for (const o of check.outboxes)
    lines.push(
      `${o.table.padEnd(width)}  ${String(o.waiting).padStart(7)}  ${String(o.published).padStart(9)}  ` +
        `${String(o.dead).padStart(4)}  ${(o.lastWrittenAt ?? '-').padEnd(24)}  ${o.lastPublishedAt ?? '-'}`,
    );
  return `${lines.join('\n')}\n`;
}

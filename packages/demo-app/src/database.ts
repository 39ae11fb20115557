import { readdir, readFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import postgres from 'postgres';

export type Sql = postgres.Sql;
/** The pool or a transaction of it: what the store's functions run on. */
export type Db = postgres.Sql | postgres.TransactionSql;

export function connectDemoDatabase(url: string, max = 10): Sql {
  return postgres(url, {
    max,
    idle_timeout: 60,
    connect_timeout: 5,
    onnotice: () => {},
    connection: { application_name: 'tdp-demo-app' },
  });
}

const migrationsDirectory = join(dirname(fileURLToPath(import.meta.url)), '..', 'migrations');

/** Applies the demo app's migrations (schema `demo`) once each, under an advisory lock. */
export async function migrateDemo(sql: Sql): Promise<void> {
  const files = (await readdir(migrationsDirectory)).filter((f) => f.endsWith('.sql')).sort();
  await sql.begin(async (tx) => {
    await tx`SELECT pg_advisory_xact_lock(hashtext('tdp.demo.migrate'))`;
    await tx.unsafe('CREATE SCHEMA IF NOT EXISTS demo');
    await tx.unsafe(
      'CREATE TABLE IF NOT EXISTS demo.schema_migration (name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())',
    );
    for (const file of files) {
      const [done] = await tx`SELECT 1 FROM demo.schema_migration WHERE name = ${file}`;
      if (done) continue;
      await tx.unsafe(await readFile(join(migrationsDirectory, file), 'utf8'));
      await tx`INSERT INTO demo.schema_migration (name) VALUES (${file})`;
    }
  });
}

import { readdir, readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import type { Sql } from './database.ts';

export const migrationsDirectory = fileURLToPath(new URL('../../../../migrations/', import.meta.url));

export interface Migration {
  version: number;
  name: string;
  sql: string;
}

export async function loadMigrations(directory = migrationsDirectory): Promise<Migration[]> {
  const files = (await readdir(directory)).filter((f) => /^\d{3}_[a-z0-9_]+\.sql$/.test(f)).sort();
  return Promise.all(
    files.map(async (file) => ({
      version: Number(file.slice(0, 3)),
      name: file.slice(4, -4),
      sql: await readFile(`${directory}/${file}`, 'utf8'),
    })),
  );
}

/**
 * Applies pending migrations in order, each in its own transaction. An advisory lock lets several
 * processes start at once: one migrates, the others wait and then find nothing to do.
 */
export async function migrate(sql: Sql, migrations?: Migration[]): Promise<string[]> {
  const all = migrations ?? (await loadMigrations());
  const applied: string[] = [];
  await sql.unsafe(`CREATE TABLE IF NOT EXISTS schema_migration (
    version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`);
  for (const migration of all) {
    await sql.begin(async (tx) => {
      await tx`SELECT pg_advisory_xact_lock(hashtext('tdp.migrate'))`;
      const [done] = await tx`SELECT 1 FROM schema_migration WHERE version = ${migration.version}`;
      if (done) return;
      await tx.unsafe(migration.sql);
      await tx`INSERT INTO schema_migration (version, name) VALUES (${migration.version}, ${migration.name})`;
      applied.push(`${migration.version}_${migration.name}`);
    });
  }
  return applied;
}

export async function migrationsCurrent(sql: Sql, expectedLatest: number): Promise<boolean> {
  const [row] = await sql<{ latest: number | null }[]>`
    SELECT max(version) AS latest FROM schema_migration`.catch(() => [{ latest: null }]);
  return row?.latest === expectedLatest;
}

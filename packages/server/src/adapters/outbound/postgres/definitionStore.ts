import type { StepDefinition } from '@tdp/protocol';
import type { DefinitionStore, StoredDefinition } from '../../../core/definitions/ports.ts';
import type { Sql } from './database.ts';

interface DefinitionRow {
  id: string;
  tenant_id: string;
  name: string;
  version: string;
  description: string | null;
  input_schema: Record<string, unknown>;
  steps: StepDefinition[];
  content_hash: string;
  published_by: string;
  published_at: Date;
}

const toDefinition = (row: DefinitionRow): StoredDefinition => ({
  id: row.id,
  tenantId: row.tenant_id,
  name: row.name,
  version: row.version,
  description: row.description,
  inputSchema: row.input_schema,
  steps: row.steps,
  contentHash: row.content_hash,
  publishedBy: row.published_by,
  publishedAt: row.published_at,
});

export class PostgresDefinitionStore implements DefinitionStore {
  constructor(private readonly sql: Sql) {}

  async insertIfAbsent(d: StoredDefinition): Promise<{ inserted: boolean; stored: StoredDefinition }> {
    // A new definition's concurrency keys and rate limits set their names' declared limits (the latest
    // published wins, so every step of a key counts against one limit, whichever definition it runs).
    const inserted = await this.sql<DefinitionRow[]>`
      WITH inserted AS (
        INSERT INTO workflow_definition (id, tenant_id, name, version, description, input_schema, steps, content_hash,
                                         published_by, published_at)
        VALUES (${d.id}, ${d.tenantId}, ${d.name}, ${d.version}, ${d.description}, ${this.sql.json(d.inputSchema as never)},
                ${this.sql.json(d.steps as never)}, ${d.contentHash}, ${d.publishedBy}, ${d.publishedAt})
        ON CONFLICT (tenant_id, name, version) DO NOTHING
        RETURNING *),
      declared AS (
        INSERT INTO concurrency_key (tenant_id, name, declared_limit, declared_interval_ms, updated_at)
        SELECT DISTINCT ON (k->>'key') i.tenant_id, k->>'key', (k->>'limit')::int, (k->>'intervalMs')::int,
               i.published_at
        FROM inserted i
        CROSS JOIN jsonb_array_elements(i.steps) AS s
        CROSS JOIN jsonb_array_elements(
          coalesce(s->'concurrency', '[]'::jsonb) || coalesce(s->'rateLimits', '[]'::jsonb)) AS k
        ORDER BY k->>'key'
        ON CONFLICT (tenant_id, name) DO UPDATE
          SET declared_limit = excluded.declared_limit, declared_interval_ms = excluded.declared_interval_ms)
      SELECT * FROM inserted`;
    if (inserted[0]) return { inserted: true, stored: toDefinition(inserted[0]) };
    const stored = await this.get(d.tenantId, d.name, d.version);
    if (!stored) throw new Error(`definition ${d.name}@${d.version} vanished after a conflict`);
    return { inserted: false, stored };
  }

  async get(tenantId: string, name: string, version: string): Promise<StoredDefinition | null> {
    const [row] = await this.sql<DefinitionRow[]>`
      SELECT * FROM workflow_definition WHERE tenant_id = ${tenantId} AND name = ${name} AND version = ${version}`;
    return row ? toDefinition(row) : null;
  }

  async list(
    tenantId: string,
    filter: { name?: string; limit: number; after?: string },
  ): Promise<StoredDefinition[]> {
    const rows = await this.sql<DefinitionRow[]>`
      SELECT * FROM workflow_definition
      WHERE tenant_id = ${tenantId}
        ${filter.name ? this.sql`AND name = ${filter.name}` : this.sql``}
        ${filter.after ? this.sql`AND id > ${filter.after}` : this.sql``}
      ORDER BY id
      LIMIT ${filter.limit}`;
    return rows.map(toDefinition);
  }
}

import { newId } from '@tdp/protocol';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase } from '../../../test/database.ts';
import { danglingReferences } from '../../../test/integrity.ts';
import { connectDatabase } from '../src/main.ts';

let database: Awaited<ReturnType<typeof createTestDatabase>>;
let sql: ReturnType<typeof connectDatabase>;

beforeAll(async () => {
  database = await createTestDatabase();
  sql = connectDatabase({ url: database.url, maxConnections: 1 });
});

afterAll(async () => {
  await sql.end();
  await database.drop();
});

describe('references the hot path keeps without foreign keys', () => {
  it('are not enforced by the database: a timeline row for no task is accepted', async () => {
    const taskId = newId();
    await sql`INSERT INTO timeline (id, task_id, execution_id, kind, message, at)
              VALUES (${newId()}, ${taskId}, ${newId()}, 'CREATED', 'orphan', now())`;
    expect(await danglingReferences(sql)).toEqual(['timeline.task_id → task: 1']);
    // …so the harness's check is what catches it; clean up, or this file's own drop() would fail.
    await sql`DELETE FROM timeline WHERE task_id = ${taskId}`;
    expect(await danglingReferences(sql)).toEqual([]);
  });

  it('are still enforced for configuration rows: an application needs its tenant', async () => {
    await expect(
      sql`INSERT INTO application (id, tenant_id, name, callback_secret_sealed, created_at, updated_at)
          VALUES (${newId()}, ${newId()}, 'x', 'sealed', now(), now())`,
    ).rejects.toMatchObject({ code: '23503' });
  });
});

/**
 * PostgreSQL updates a row in place (HOT: no new index entries, no dead index tuples) only when no
 * indexed column changes. A task's hot rows (task, execution, step) are rewritten by every event, so
 * none of the columns an ordinary progress report changes may be part of an index, as key or predicate.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Harness, startHarness } from '../../../test/harness.ts';
import { coordinator } from '../../../test/statusFixture.ts';
import { connectDatabase } from '../src/main.ts';

let h: Harness;
let c: Awaited<ReturnType<typeof coordinator>>;
let sql: ReturnType<typeof connectDatabase>;

beforeAll(async () => {
  h = await startHarness();
  c = await coordinator(h);
  sql = connectDatabase({ url: h.databaseUrl, maxConnections: 2 });
});
afterAll(async () => {
  await sql.end();
  await h.close();
});

/** Columns of `table` used by any of its indexes, in keys, expressions or predicates. */
async function indexedColumns(table: string): Promise<Set<string>> {
  const rows = await sql<{ name: string }[]>`
    SELECT DISTINCT a.attname AS name
    FROM pg_index i
    JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum > 0 AND NOT a.attisdropped
    WHERE i.indrelid = ${table}::regclass
      AND (a.attnum = ANY(i.indkey)
        OR pg_get_expr(i.indpred, i.indrelid) ~ ('\\m' || a.attname || '\\M')
        OR pg_get_expr(i.indexprs, i.indrelid) ~ ('\\m' || a.attname || '\\M'))`;
  return new Set(rows.map((r) => r.name));
}

/** The columns whose values differ between two versions of a row. */
function changed(before: Record<string, unknown>, after: Record<string, unknown>): string[] {
  const text = (v: unknown) => JSON.stringify(v, (_, x) => (typeof x === 'bigint' ? x.toString() : x));
  return Object.keys(after).filter((k) => text(before[k]) !== text(after[k]));
}

describe('updates in place', () => {
  it('a progress report changes no indexed column of the task, execution or step row', async () => {
    const wf = await c.createWorkflow({
      tasks: [
        {
          clientTaskKey: 'watched',
          title: 'A step with a heartbeat timeout',
          knownSteps: [
            {
              stepId: 'work',
              operationCode: 'WORK.DO',
              expectedProducer: 'worker-service',
              heartbeatTimeoutSeconds: 60,
            },
          ],
        },
      ],
    });
    const taskId = wf.tasks[0]!.taskId;
    const ctx = await c.activate(taskId, 'work');
    expect((await c.report(ctx, c.event(ctx))).status).toBe(200);

    const rows = async () => ({
      task: (await sql`SELECT * FROM task WHERE id = ${taskId}`)[0]!,
      execution: (
        await sql`SELECT e.* FROM execution e JOIN task t ON e.id = t.current_execution_id WHERE t.id = ${taskId}`
      )[0]!,
      step: (await sql`SELECT * FROM step WHERE task_id = ${taskId}`)[0]!,
    });
    const before = await rows();
    // Later, so that time-derived columns (the heartbeat deadline among them) move as they would.
    h.clock.advance(5_000);
    const progress = c.event(ctx, { sourceSeq: 2, eventType: 'STEP_PROGRESS', progress: { percent: 40 } });
    expect((await c.report(ctx, progress)).status).toBe(200);
    const after = await rows();

    for (const table of ['task', 'execution', 'step'] as const) {
      const moved = changed(before[table], after[table]);
      // The report did rewrite the row (so the check below is not vacuous)…
      expect({ table, rewritten: moved.length > 0 }).toEqual({ table, rewritten: true });
      // …and nothing it rewrote is indexed.
      const indexed = await indexedColumns(table);
      expect({ table, indexed: moved.filter((name) => indexed.has(name)) }).toEqual({ table, indexed: [] });
    }
    expect(changed(before.step, after.step)).toEqual(
      expect.arrayContaining(['version', 'heartbeat_deadline_at']),
    );
  });
});

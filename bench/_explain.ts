import { startTemporaryPostgres } from '../packages/cli/src/embeddedPostgres.ts';
import { connectDatabase } from '../packages/server/src/main.ts';
import { fill, finishedTask } from './growth.ts';
import { benchDatabase } from './support.ts';

const postgres = await startTemporaryPostgres();
const filled = await benchDatabase(postgres.adminUrl);
const sql = connectDatabase({ url: filled.url, maxConnections: 1, statementTimeoutMs: 0, answerDeadlineMs: 3_600_000 });
const taskId = await finishedTask(filled.url);
await fill(sql, taskId, 50_000);
await sql`VACUUM ANALYZE`;
const now = new Date().toISOString();
const queries = [
  `SELECT id FROM realtime_outbox WHERE ((status IN ('PENDING', 'FAILED') AND available_at <= '${now}') OR (status = 'PUBLISHING' AND claim_expires_at <= '${now}')) AND NOT EXISTS (SELECT 1 FROM realtime_outbox AS earlier WHERE earlier.aggregate_id = realtime_outbox.aggregate_id AND earlier.aggregate_version < realtime_outbox.aggregate_version AND earlier.status IN ('PENDING', 'PUBLISHING', 'FAILED')) ORDER BY available_at, id LIMIT 100 FOR UPDATE SKIP LOCKED`,
  `SELECT least((SELECT min(available_at) FROM realtime_outbox WHERE status IN ('PENDING', 'FAILED')), (SELECT min(claim_expires_at) FROM realtime_outbox WHERE status = 'PUBLISHING'))`,
  `SELECT min(created_at) FROM realtime_outbox WHERE status IN ('PENDING', 'PUBLISHING', 'FAILED')`,
  `SELECT status, count(*) FROM realtime_outbox WHERE status <> 'PUBLISHED' GROUP BY status`,
  `SELECT count(*) FROM step WHERE status = 'RUNNING' AND health = 'STALE'`,
];
for (const q of queries) {
  const plan = await sql.unsafe(`EXPLAIN ${q}`);
  console.log(q.slice(0, 90));
  for (const r of plan) console.log('   ', r['QUERY PLAN']);
}
const prepared = await sql`EXPLAIN SELECT id FROM realtime_outbox WHERE ((status IN ('PENDING', 'FAILED') AND available_at <= ${now}) OR (status = 'PUBLISHING' AND claim_expires_at <= ${now})) ORDER BY available_at, id LIMIT ${100}`;
for (const r of prepared) console.log('  P', r['QUERY PLAN']);
await sql.end(); await filled.close(); await postgres.stop();

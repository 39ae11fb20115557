import { startTemporaryPostgres } from '../packages/cli/src/embeddedPostgres.ts';
import { connectDatabase } from '../packages/server/src/main.ts';
import { measureHttp } from './create.ts';
import { measureEventLoads } from './events.ts';
import { fill, finishedTask } from './growth.ts';
import { benchDatabase, describe } from './support.ts';

const postgres = await startTemporaryPostgres();
const filled = await benchDatabase(postgres.adminUrl);
const sql = connectDatabase({
  url: filled.url,
  maxConnections: 1,
  statementTimeoutMs: 0,
  answerDeadlineMs: 3_600_000,
});
const taskId = await finishedTask(filled.url);
await fill(sql, taskId, Number(process.env.N ?? 200_000));
await sql`VACUUM ANALYZE`;
await sql`SELECT pg_stat_reset()`;
const r = await measureHttp(filled.url, { TDP_RETENTION_SWEEP: process.env.SWEEP ?? 'off' });
console.log('create', describe(r));
const stats =
  await sql`SELECT relname, seq_scan, seq_tup_read, idx_scan, idx_tup_fetch, n_tup_ins FROM pg_stat_user_tables ORDER BY seq_tup_read DESC LIMIT 12`;
console.table(stats);
await sql`SELECT pg_stat_reset()`;
const e = await measureEventLoads(filled.url, { tasks: 200, events: 10_000, heartbeats: 10_000 }, { TDP_RETENTION_SWEEP: process.env.SWEEP ?? 'off' });
console.log('events', describe(e.batch));
console.table(
  await sql`SELECT relname, seq_scan, seq_tup_read, idx_scan, idx_tup_fetch, n_tup_ins FROM pg_stat_user_tables ORDER BY seq_tup_read DESC LIMIT 12`,
);
await sql.end();
await filled.close();
await postgres.stop();

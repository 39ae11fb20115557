/**
 * Migration 030 on a database that has realtime rows of the old shape (one per message): what is still
 * to publish and what is DEAD moves over as rows of one message, a claim in progress becomes due again,
 * the published history goes, and the relay then publishes what moved.
 */
import { randomBytes } from 'node:crypto';
import { newId } from '@tdp/protocol';
import { afterAll, beforeAll, expect, inject, it } from 'vitest';
import { withDatabase } from '../../../test/globalSetup.ts';
import type { Sql } from '../src/adapters/outbound/postgres/database.ts';
import { loadMigrations, migrate } from '../src/adapters/outbound/postgres/migrate.ts';
import { PostgresRealtimeOutbox } from '../src/adapters/outbound/postgres/realtimeOutbox.ts';
import { realtimeClaimPolicy } from '../src/core/outbox/policy.ts';
import { type RealtimeMessage, relayRealtime } from '../src/core/realtime/relay.ts';
import { connectDatabase } from '../src/main.ts';

const adminUrl = inject('databaseAdminUrl');
const name = `${inject('testDatabasePrefix')}${randomBytes(6).toString('hex')}`;
let sql: Sql;

/** An empty database (not the migrated template): the test migrates it in two steps. */
async function admin(statement: string) {
  const connection = connectDatabase({ url: adminUrl, maxConnections: 1 });
  try {
    await connection.unsafe(statement);
  } finally {
    await connection.end();
  }
}

beforeAll(async () => {
  await admin(`CREATE DATABASE ${name}`);
  sql = connectDatabase({ url: withDatabase(adminUrl, name), maxConnections: 2 });
});
afterAll(async () => {
  await sql?.end();
  await admin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
});

it('moves the unpublished and DEAD rows over one message each and drops the published ones', async () => {
  const all = await loadMigrations();
  await migrate(
    sql,
    all.filter((m) => m.version < 30),
  );
  const taskId = newId();
  const at = new Date('2026-12-01T10:00:00Z');
  const old = async (status: string, channel: string, version: number) => {
    const id = newId();
    await sql`
      INSERT INTO realtime_outbox (id, tenant_id, aggregate_type, aggregate_id, aggregate_version, channel,
                                   projection, payload, status, attempts, available_at, last_error, created_at)
      VALUES (${id}, ${newId()}, 'TASK', ${taskId}, ${version}, ${channel}, 'USER_SUMMARY',
              ${sql.json({ kind: 'task.summary', taskVersion: String(version) })}, ${status},
              ${status === 'PENDING' ? 0 : 3}, ${at}, ${status === 'DEAD' ? 'refused' : null}, ${at})`;
    return id;
  };
  await old('PUBLISHED', 'task_user:a', 1);
  const pending = await old('PENDING', 'task_user:a', 2);
  const claimed = await old('PUBLISHING', 'task_detail:a', 2);
  const dead = await old('DEAD', 'task_ops:all', 2);

  await migrate(sql, all);
  const moved = await sql`
    SELECT id, outbox_id, status, attempts, last_error, channel, aggregate_id, aggregate_version, payload
    FROM realtime_message ORDER BY channel`;
  expect(moved).toEqual([
    {
      id: claimed,
      outbox_id: claimed,
      status: 'PENDING',
      attempts: 3,
      last_error: null,
      channel: 'task_detail:a',
      aggregate_id: taskId,
      aggregate_version: 2n,
      payload: { kind: 'task.summary', taskVersion: '2' },
    },
    expect.objectContaining({ id: dead, status: 'DEAD', last_error: 'refused', channel: 'task_ops:all' }),
    expect.objectContaining({ id: pending, status: 'PENDING', attempts: 0, channel: 'task_user:a' }),
  ]);

  const published: RealtimeMessage[] = [];
  const relayed = await relayRealtime(
    {
      rows: new PostgresRealtimeOutbox(sql, realtimeClaimPolicy),
      publisher: {
        publish: async (messages) => {
          published.push(...messages);
          return messages.map(() => ({ ok: true }));
        },
      },
      clock: { now: () => new Date() },
    },
    100,
  );
  expect(relayed).toBe(2);
  expect(published.map((m) => m.channel).sort()).toEqual(['task_detail:a', 'task_user:a']);
  const statuses =
    await sql`SELECT status, count(*)::int AS n FROM realtime_outbox GROUP BY status ORDER BY status`;
  expect(statuses).toEqual([
    { status: 'DEAD', n: 1 },
    { status: 'PUBLISHED', n: 2 },
  ]);
});

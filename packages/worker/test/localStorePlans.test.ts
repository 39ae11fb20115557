/**
 * The reads the worker makes with every report batch cost what is open, not what the prune window keeps
 * (ten minutes of acknowledged commands and finished attempts): SQLite's plan for each goes by an index.
 * Without them, the read of unacknowledged commands scanned the whole inbox with every batch, and took
 * most of a busy worker's CPU.
 */
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { newId } from '@tdp/protocol';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { heldAttempts, LocalStore, unackedCommands } from '../src/localStore.ts';

const plan = (db: Database.Database, sql: string, ...params: unknown[]) =>
  (db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(...params) as { detail: string }[]).map((r) => r.detail);

describe("the worker's local store", () => {
  it('reads unacknowledged commands and held attempts by index, with thousands acknowledged', async () => {
    const path = join(await mkdtemp(join(tmpdir(), 'tdp-plans-')), 'worker.db');
    const store = new LocalStore(path, newId);
    const workerId = newId();
    const received: string[] = [];
    for (let i = 0; i < 2_000; i += 1) {
      const commandId = newId();
      received.push(commandId);
      store.receive(workerId, { commandId, type: 'DRAIN', payload: {} });
    }
    store.markAcked(received.slice(0, 1_997));
    expect(store.unacked()).toEqual(received.slice(1_997).sort());

    const db = new Database(path, { readonly: true });
    try {
      expect(plan(db, unackedCommands).join('\n')).toMatch(/USING (COVERING )?INDEX inbox_unacked/);
      const held = plan(db, heldAttempts).join('\n');
      expect(held).toMatch(/USING (COVERING )?INDEX attempt_running/);
      expect(held).toMatch(/USING (COVERING )?INDEX outbox_unsent/);
      expect(
        plan(db, 'SELECT max(command_id) AS id FROM inbox WHERE worker_id = ?', workerId).join('\n'),
      ).toMatch(/USING (COVERING )?INDEX inbox_by_worker/);
    } finally {
      db.close();
      store.close();
    }
  });
});

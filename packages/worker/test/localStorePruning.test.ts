/** The worker's SQLite forgets what the server acknowledged, and only that (docs/retention.md). */
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { newId } from '@tdp/protocol';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { LocalStore } from '../src/localStore.ts';
import { startCommand } from './fixtures/commands.ts';

const hour = 3_600_000;

describe('LocalStore.prune', () => {
  it('drops acknowledged commands, answered events and finished attempts past the window, keeps the rest', async () => {
    let now = Date.now();
    const path = join(await mkdtemp(join(tmpdir(), 'tdp-worker-')), 'worker.db');
    const store = new LocalStore(path, newId, () => now);
    const workerId = newId();
    // An attempt that finished and whose events the server answered, long ago.
    const done = startCommand(newId());
    store.receive(workerId, done);
    const doneEvents = [
      store.record(done.payload.attemptId, { eventType: 'STEP_STARTED' }),
      store.record(done.payload.attemptId, { eventType: 'STEP_COMPLETED' }, true),
    ].map((e) => e!.eventId);
    store.markSent(doneEvents);
    store.markAcked([done.commandId]);
    // A finished attempt whose last event the server has not answered yet.
    const unsent = startCommand(newId());
    store.receive(workerId, unsent);
    store.markAcked([unsent.commandId]);
    store.record(unsent.payload.attemptId, { eventType: 'STEP_COMPLETED' }, true);
    // A running attempt with an answered event; its command is the session's newest, acknowledged.
    const running = startCommand(newId());
    store.receive(workerId, running);
    store.markAcked([running.commandId]);
    store.markSent([store.record(running.payload.attemptId, { eventType: 'STEP_STARTED' })!.eventId]);

    now += 23 * hour;
    expect(store.prune(24 * hour)).toEqual({ outbox: 0, attempt: 0, inbox: 0 });
    now += 2 * hour;
    expect(store.prune(24 * hour)).toEqual({ outbox: 3, attempt: 1, inbox: 2 });
    store.close();

    const db = new Database(path, { readonly: true });
    const ids = (sql: string) => (db.prepare(sql).all() as { id: string }[]).map((r) => r.id).sort();
    expect(ids('SELECT attempt_id AS id FROM attempt')).toEqual(
      [unsent.payload.attemptId, running.payload.attemptId].sort(),
    );
    expect(ids('SELECT attempt_id AS id FROM outbox')).toEqual([unsent.payload.attemptId]);
    // The newest command stays: it is the Last-Event-ID of the next reconnect.
    expect(ids('SELECT command_id AS id FROM inbox')).toEqual([running.commandId]);
    db.close();
  });
});

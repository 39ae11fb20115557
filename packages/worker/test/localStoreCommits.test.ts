/**
 * The worker's local store commits the writes of a few milliseconds together (one fsync for all), and
 * commits before anything read from them is sent: the server only learns what is on disk.
 */
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { newId } from '@tdp/protocol';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { LocalStore } from '../src/localStore.ts';
import { startCommand } from './fixtures/commands.ts';

async function stores() {
  const path = join(await mkdtemp(join(tmpdir(), 'tdp-commits-')), 'worker.db');
  const store = new LocalStore(path, newId);
  // Another connection sees only what was committed; its data_version moves once per commit of others.
  const other = new Database(path, { readonly: true });
  const commits = () => other.pragma('data_version', { simple: true }) as number;
  const inboxSize = () => (other.prepare('SELECT count(*) AS n FROM inbox').get() as { n: number }).n;
  return { store, other, commits, inboxSize };
}

const start = () => {
  const command = startCommand();
  return { attemptId: command.payload.attemptId, command };
};

describe("the worker's local store commits", () => {
  it('the writes of one moment in one commit', async () => {
    const { store, other, commits } = await stores();
    const workerId = newId();
    const before = commits();
    for (let i = 0; i < 20; i += 1) {
      const { attemptId, command } = start();
      store.receive(workerId, command);
      store.record(attemptId, { eventType: 'STEP_STARTED' });
      store.record(attemptId, { eventType: 'STEP_COMPLETED' }, true);
    }
    store.flush();
    expect(commits() - before).toBe(1);
    other.close();
    store.close();
  });

  it('what is read to be sent is committed first; the rest within milliseconds', async () => {
    const { store, other, inboxSize } = await stores();
    const workerId = newId();
    const first = start();
    store.receive(workerId, first.command);
    expect(inboxSize()).toBe(0);
    expect(store.unacked()).toEqual([first.command.commandId]);
    expect(inboxSize()).toBe(1);

    store.receive(workerId, start().command);
    await expect.poll(inboxSize, { timeout: 1_000, interval: 5 }).toBe(2);

    const third = start();
    store.receive(workerId, third.command);
    store.record(third.attemptId, { eventType: 'STEP_STARTED' });
    expect(store.unsent(10).map((e) => e.attemptId)).toEqual([third.attemptId]);
    expect(inboxSize()).toBe(3);
    other.close();
    store.close();
  });

  it('closing commits what is left', async () => {
    const { store, other, inboxSize } = await stores();
    store.receive(newId(), start().command);
    store.close();
    expect(inboxSize()).toBe(1);
    other.close();
  });
});

/**
 * The sweep's pass (core/retention/sweep.ts): a table walked to its end waits for the others, so a small
 * table is read once per pass while a big one takes many rounds; the pass ends when every table has
 * reached its end. A pure test of the use case over an in-memory store of table sizes (the SQL is
 * tested against PostgreSQL in retention.test.ts).
 */
import { newId } from '@tdp/protocol';
import { expect, it } from 'vitest';
import { deleteOnlyTables } from '../src/core/retention/policy.ts';
import type { RetentionStore } from '../src/core/retention/ports.ts';
import { sweepOnce } from '../src/core/retention/sweep.ts';
import { defaultSettings } from '../src/main.ts';

/** Each table's size in rounds (range walks) and how many ranges each one has read. */
function storeOf(rounds: Record<string, number>) {
  const read: Record<string, number> = {};
  const cursor: Record<string, number> = {};
  const store = {
    sweepTable: async (policy: { table: string }) => {
      read[policy.table] = (read[policy.table] ?? 0) + 1;
      const next = (cursor[policy.table] ?? 0) + 1;
      const wrapped = next >= (rounds[policy.table] ?? 1);
      cursor[policy.table] = wrapped ? 0 : next;
      return { deleted: 0, wrapped };
    },
    oldestRowAges: async () => ({}),
  } as unknown as RetentionStore;
  return { store, read };
}

it('reads a small table once per pass while a big one is walked, and ends the pass when all are walked', async () => {
  const { store, read } = storeOf({ realtime_outbox: 5 });
  const deps = {
    store,
    archive: null,
    clock: { now: () => new Date() },
    ids: { newId },
    observer: { swept: () => {}, archived: () => {}, oldestRowAge: () => {}, failed: () => {} },
    settings: defaultSettings.retention,
  };
  const walked = new Set<string>();
  const more: boolean[] = [];
  for (let round = 0; round < 5; round += 1) more.push((await sweepOnce(deps, walked)).more);
  expect(more).toEqual([true, true, true, true, false]);
  // The big table took its five rounds; every other one was read once.
  expect(read.realtime_outbox).toBe(5);
  for (const table of deleteOnlyTables.filter((t) => t !== 'realtime_outbox'))
    expect(read[table], table).toBe(1);
  expect(walked.size).toBe(deleteOnlyTables.length);
});

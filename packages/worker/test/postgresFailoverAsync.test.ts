/**
 * PostgreSQL failover under load, asynchronous standby (postgresDrill.ts): the standby stops receiving
 * WAL, the primary goes on committing for a second, dies, and the standby is promoted. Creates the client
 * saw accepted in that second are lost with the primary — the price of asynchronous replication — and
 * only those: the loss is bounded by the lag. The client re-supplies every create it made with its
 * Idempotency-Key (as an application replays its own outbox after a failover): survivors answer as
 * replays, the lost ones are created again, and in the end every task is there once and finishes once.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createUnderLoad,
  createUntilAccepted,
  type Drill,
  startDrill,
  succeeded,
  tasksInDatabase,
} from './postgresDrill.ts';
import { killAllWorkerProcesses, startWorkerProcess, stopWorkerProcess } from './support.ts';

const directory = mkdtempSync(join(tmpdir(), 'tdp-pg-failover-async-test-'));
let drill: Drill;

beforeAll(async () => {
  drill = await startDrill({ synchronous: false });
}, 180_000);

afterAll(async () => {
  killAllWorkerProcesses();
  await drill?.close();
});

describe('PostgreSQL failover, asynchronous standby', () => {
  it('loses only what the standby had not received, and the client’s replay re-supplies each of those once', async () => {
    const { pair, servers } = drill;
    const worker = await startWorkerProcess(
      servers.map((s) => s.url).join(','),
      drill.workerKey,
      join(directory, 'worker.db'),
      'node-pg-failover-async',
    );
    try {
      const total = 150;
      let heldAt = 0;
      let killedAt = 0;
      const load = await createUnderLoad(drill, { total, perSecond: 25 }, async () => {
        await sleep(2_000);
        heldAt = Date.now();
        pair.holdReplication();
        await sleep(1_000);
        killedAt = Date.now();
        await pair.killPrimary();
        await sleep(1_000);
        await pair.promoteStandby();
      });
      expect(load.accepted.size).toBe(total);

      // The replay: every create again, with its key. A survivor answers as a replay of the same task.
      const deadline = Date.now() + 60_000;
      const lost: string[] = [];
      for (const [name, id] of load.accepted) {
        const again = await createUntilAccepted(drill, name, deadline);
        if (again.replayed) expect(again.id).toBe(id);
        else lost.push(name);
      }
      const acceptedWhileHeld = load.acceptedAt.filter((at) => at >= heldAt && at <= killedAt).length;
      console.log(
        `pg failover (asynchronous): ${total} accepted; ${acceptedWhileHeld} while the standby received nothing, ` +
          `${lost.length} lost with the primary and created again by the client's replay`,
      );
      // Commits the standby never received are lost, and nothing older: the loss is the lag.
      expect(lost.length).toBeGreaterThan(0);
      expect(lost.length).toBeLessThanOrEqual(acceptedWhileHeld + 5);

      const tasks = await tasksInDatabase(pair.nodeUrl(pair.standby, 'tdp'));
      expect(tasks).toHaveLength(total);
      expect(new Set(tasks.map((t) => t.name)).size).toBe(total);
      await expect
        .poll(
          () =>
            succeeded(
              drill,
              tasks.map((t) => t.id),
            ),
          { timeout: 90_000, interval: 1_000 },
        )
        .toBe(total);
      for (const task of await tasksInDatabase(pair.nodeUrl(pair.standby, 'tdp')))
        expect(task.completed).toBe(1);
      for (const server of servers) expect((await fetch(`${server.url}/readyz`)).status).toBe(200);
    } finally {
      await stopWorkerProcess(worker);
    }
  }, 240_000);
});

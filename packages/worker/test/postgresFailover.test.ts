/**
 * PostgreSQL failover under load, synchronous standby: two `tdp server` processes given both hosts in
 * one DATABASE_URL, a worker process on both, a client creating tasks at a steady rate (postgresDrill.ts).
 * The primary dies (immediate shutdown) and the standby is promoted: every task the client saw accepted
 * is there once, and runs once. A URL naming only standbys keeps a server not ready, saying why, and
 * writes nothing.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tdpProcess } from '../../../test/tdpProcess.ts';
import { freePort } from '../../cli/src/embeddedPostgres.ts';
import { connectDatabase } from '../../server/src/main.ts';
import { createUnderLoad, type Drill, startDrill, succeeded, tasksInDatabase } from './postgresDrill.ts';
import { killAllWorkerProcesses, startWorkerProcess, stopWorkerProcess } from './support.ts';

const directory = mkdtempSync(join(tmpdir(), 'tdp-pg-failover-test-'));
let drill: Drill;

beforeAll(async () => {
  drill = await startDrill({ synchronous: true });
}, 180_000);

afterAll(async () => {
  killAllWorkerProcesses();
  await drill?.close();
});

describe('PostgreSQL failover, synchronous standby', () => {
  it('a URL naming only standbys keeps a server not ready, saying so; it writes nothing and stays up', async () => {
    const { pair } = drill;
    const standbyOnly = pair
      .nodeUrl(pair.standby, 'tdp')
      .replace(
        `127.0.0.1:${pair.standby.port}`,
        `127.0.0.1:${pair.standby.port},127.0.0.1:${pair.standby.port}`,
      );
    const server = tdpProcess({ databaseUrl: standbyOnly, port: await freePort(), env: drill.env });
    try {
      await server.start({ until: 'live' });
      await expect
        .poll(
          async () => {
            const response = await fetch(`${server.url}/readyz`);
            return { status: response.status, body: await response.json() };
          },
          { timeout: 15_000 },
        )
        .toMatchObject({
          status: 503,
          body: {
            code: 'NOT_READY',
            checks: { database: expect.stringMatching(/every database host is read-only/) },
          },
        });
      const created = await drill.call(server, 'POST', '/v1/tasks', drill.apiKey, {
        workflowName: 'echo-wf',
        workflowVersion: '1',
        name: 'never',
        input: { text: 'never' },
      });
      expect(created.status).toBe(503);
      expect((await fetch(`${server.url}/healthz`)).status).toBe(200);
      const sql = connectDatabase({ url: pair.nodeUrl(pair.primary, 'tdp'), maxConnections: 1 });
      try {
        expect(await sql`SELECT count(*)::int AS n FROM task WHERE name = 'never'`).toEqual([{ n: 0 }]);
      } finally {
        await sql.end();
      }
    } finally {
      await server.kill();
    }
  }, 90_000);

  it('the primary dies under load and the standby is promoted: every accepted task is there once and runs once', async () => {
    const { pair, servers } = drill;
    const worker = await startWorkerProcess(
      servers.map((s) => s.url).join(','),
      drill.workerKey,
      join(directory, 'worker.db'),
      'node-pg-failover',
    );
    try {
      const total = 150;
      let killedAt = 0;
      let promotedAt = 0;
      const load = await createUnderLoad(drill, { total, perSecond: 25 }, async () => {
        await sleep(2_000);
        killedAt = Date.now();
        await pair.killPrimary();
        await sleep(1_000); // the time a failover manager takes to decide
        await pair.promoteStandby();
        promotedAt = Date.now();
      });
      expect(load.accepted.size).toBe(total);
      // The load went on across the failover: tasks were accepted before the kill and after the promotion.
      expect(load.acceptedAt.filter((at) => at < killedAt).length).toBeGreaterThan(10);
      expect(load.acceptedAt.filter((at) => at > promotedAt).length).toBeGreaterThan(10);
      const firstAfter = Math.min(...load.acceptedAt.filter((at) => at > killedAt));
      console.log(
        `pg failover (synchronous): ${total} accepted, ${load.retried} needed a retry; the standby ` +
          `promoted ${promotedAt - killedAt} ms after the kill, the first create accepted ${firstAfter - killedAt} ms after it`,
      );

      // Every accepted task finishes (through the API), on the promoted node.
      const ids = [...load.accepted.values()];
      await expect.poll(() => succeeded(drill, ids), { timeout: 90_000, interval: 1_000 }).toBe(total);
      // And by SQL on the promoted node: one task per name, the one the client was told, completed once.
      const tasks = await tasksInDatabase(pair.nodeUrl(pair.standby, 'tdp'));
      expect(tasks).toHaveLength(total);
      for (const task of tasks) {
        expect(load.accepted.get(task.name)).toBe(task.id);
        expect(task.completed).toBe(1);
      }
      for (const server of servers) expect((await fetch(`${server.url}/readyz`)).status).toBe(200);
    } finally {
      await stopWorkerProcess(worker);
    }
  }, 240_000);
});

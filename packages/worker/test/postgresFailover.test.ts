/**
 * PostgreSQL failover under load, on real servers: a primary with a synchronous hot standby (the
 * installed PostgreSQL, test/postgresPair.ts), two `tdp server` processes given both hosts in one
 * DATABASE_URL, a worker process on both replicas, and a client creating tasks at a steady rate that
 * retries a refused create with the same Idempotency-Key. The primary dies (immediate shutdown) and the
 * standby is promoted: every task the client saw accepted is there once, and runs once. A URL naming
 * only standbys keeps a server not ready, saying why, and writes nothing.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { newId } from '@tdp/protocol';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PostgresPair } from '../../../test/postgresPair.ts';
import { type TdpProcess, tdpProcess } from '../../../test/tdpProcess.ts';
import { freePort } from '../../cli/src/embeddedPostgres.ts';
import { connectDatabase, generateKeyringEntry, migrate } from '../../server/src/main.ts';
import { killAllWorkerProcesses, startWorkerProcess, stopWorkerProcess } from './support.ts';

const adminToken = `tdpadm_pgfailover_${newId()}`;
const env = {
  TDP_ADMIN_TOKEN: adminToken,
  TDP_SECRET_KEYS: generateKeyringEntry('pgfailover'),
  TDP_LEASE_CHECK_INTERVAL_MS: '500',
};
const directory = mkdtempSync(join(tmpdir(), 'tdp-pg-failover-test-'));
let pair: PostgresPair;
let servers: TdpProcess[] = [];
let apiKey: string;
let workerKey: string;

async function call(
  server: TdpProcess,
  method: string,
  path: string,
  token: string,
  body?: unknown,
  key?: string,
) {
  const response = await fetch(`${server.url}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${token}`,
      ...(body === undefined
        ? {}
        : { 'content-type': 'application/json', 'idempotency-key': key ?? newId() }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    signal: AbortSignal.timeout(20_000),
  });
  const text = await response.text();
  return { status: response.status, body: (text ? JSON.parse(text) : null) as any };
}

beforeAll(async () => {
  pair = await PostgresPair.start({ synchronous: true });
  const admin = connectDatabase({ url: pair.nodeUrl(pair.primary, 'postgres'), maxConnections: 1 });
  await admin.unsafe('CREATE DATABASE tdp');
  await admin.end();
  const migrator = connectDatabase({ url: pair.urlFor('tdp'), maxConnections: 1 });
  await migrate(migrator);
  await migrator.end();
  servers = [
    tdpProcess({ databaseUrl: pair.urlFor('tdp'), port: await freePort(), env }),
    tdpProcess({ databaseUrl: pair.urlFor('tdp'), port: await freePort(), env }),
  ];
  await Promise.all(servers.map((server) => server.start()));
  const first = servers[0]!;
  const tenant = await call(first, 'POST', '/admin/v1/tenants', adminToken, { name: 'pg-failover' });
  const application = await call(
    first,
    'POST',
    `/admin/v1/tenants/${tenant.body.id}/applications`,
    adminToken,
    {
      name: 'pg-failover-app',
    },
  );
  apiKey = application.body.apiKey.key;
  workerKey = (await call(first, 'POST', '/admin/v1/worker-credentials', adminToken, {})).body.key;
  const defined = await call(first, 'POST', '/v1/workflow-definitions', apiKey, {
    name: 'echo-wf',
    version: '1',
    steps: [
      {
        key: 'only',
        capability: 'test.echo',
        capabilityVersion: '1',
        inputMapping: { text: '$.input.text', delayMs: '$.input.delayMs' },
        retry: { maxAttempts: 5, initialBackoffMs: 200, maxBackoffMs: 1_000, multiplier: 2 },
      },
    ],
  });
  expect(defined.status).toBe(201);
}, 180_000);

afterAll(async () => {
  killAllWorkerProcesses();
  await Promise.all(servers.map((server) => server.kill()));
  await pair?.close();
});

/** Creates task `name` until a replica accepts it, alternating replicas, the same key each time. */
async function createUntilAccepted(name: string, deadline: number): Promise<{ id: string; tries: number }> {
  for (let tries = 1; ; tries++) {
    const server = servers[tries % servers.length]!;
    const created = await call(
      server,
      'POST',
      '/v1/tasks',
      apiKey,
      { workflowName: 'echo-wf', workflowVersion: '1', name, input: { text: name, delayMs: 50 } },
      `create-${name}`,
    ).catch(() => null);
    if (created && (created.status === 201 || created.status === 200))
      return { id: created.body.task.id as string, tries };
    if (Date.now() > deadline) throw new Error(`${name} was never accepted (last: ${created?.status})`);
    await sleep(200);
  }
}

describe('PostgreSQL failover, synchronous standby', () => {
  it('a URL naming only standbys keeps a server not ready, saying so; it writes nothing and stays up', async () => {
    const standbyOnly = `${pair.nodeUrl(pair.standby, 'tdp')}`.replace(
      `127.0.0.1:${pair.standby.port}`,
      `127.0.0.1:${pair.standby.port},127.0.0.1:${pair.standby.port}`,
    );
    const server = tdpProcess({ databaseUrl: standbyOnly, port: await freePort(), env });
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
      // A create waits for a host that takes writes, then is refused as unavailable: nothing written.
      const created = await call(server, 'POST', '/v1/tasks', apiKey, {
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
    const worker = await startWorkerProcess(
      servers.map((s) => s.url).join(','),
      workerKey,
      join(directory, 'worker.db'),
      'node-pg-failover',
    );
    try {
      const total = 150;
      const accepted = new Map<string, string>();
      const refusedTries: number[] = [];
      const acceptedAt: number[] = [];
      const deadline = Date.now() + 90_000;
      const creating = (async () => {
        const pending: Promise<void>[] = [];
        for (let i = 0; i < total; i++) {
          const name = `t-${String(i).padStart(4, '0')}`;
          pending.push(
            createUntilAccepted(name, deadline).then(({ id, tries }) => {
              accepted.set(name, id);
              acceptedAt.push(Date.now());
              if (tries > 1) refusedTries.push(tries);
            }),
          );
          await sleep(40); // 25 creates a second
        }
        await Promise.all(pending);
      })();
      await sleep(2_000);
      const killedAt = Date.now();
      await pair.killPrimary();
      await sleep(1_000);
      await pair.promoteStandby();
      const promotedAt = Date.now();
      await creating;
      expect(accepted.size).toBe(total);
      // The load went on across the failover: tasks were accepted before the kill and after the promotion.
      expect(acceptedAt.filter((at) => at < killedAt).length).toBeGreaterThan(10);
      expect(acceptedAt.filter((at) => at > promotedAt).length).toBeGreaterThan(10);
      const firstAfter = Math.min(...acceptedAt.filter((at) => at > killedAt));
      console.log(
        `pg failover (synchronous): ${total} accepted, ${refusedTries.length} needed a retry; the standby ` +
          `promoted ${promotedAt - killedAt} ms after the kill, the first create accepted ${firstAfter - killedAt} ms after it`,
      );

      // Every accepted task finishes (through the API), on the promoted node.
      const ids = [...accepted.values()];
      await expect
        .poll(
          async () => {
            let done = 0;
            for (const id of ids) {
              const view = await call(servers[0]!, 'GET', `/v1/tasks/${id}`, apiKey).catch(() => null);
              if (view?.body?.task?.lifecycleStatus === 'SUCCEEDED') done += 1;
            }
            return done;
          },
          { timeout: 90_000, interval: 1_000 },
        )
        .toBe(total);

      // And by SQL on the promoted node: one task per name, each completed once.
      const sql = connectDatabase({ url: pair.nodeUrl(pair.standby, 'tdp'), maxConnections: 1 });
      try {
        const tasks = await sql<{ name: string; id: string }[]>`SELECT name, id::text FROM task`;
        expect(tasks).toHaveLength(total);
        expect(new Set(tasks.map((t) => t.name)).size).toBe(total);
        for (const task of tasks) expect(accepted.get(task.name)).toBe(task.id);
        const completions = await sql<{ completed: number }[]>`
          SELECT count(*) FILTER (WHERE e.type = 'STEP_COMPLETED')::int AS completed
          FROM task t LEFT JOIN task_event e ON e.task_id = t.id
          GROUP BY t.id`;
        expect(completions.every((c) => c.completed === 1)).toBe(true);
      } finally {
        await sql.end();
      }
      // Both replicas serve again.
      for (const server of servers) expect((await fetch(`${server.url}/readyz`)).status).toBe(200);
    } finally {
      await stopWorkerProcess(worker);
    }
  }, 240_000);
});

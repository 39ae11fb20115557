/**
 * The PostgreSQL failover drills' set-up and load: a primary and a hot standby (test/postgresPair.ts),
 * a migrated `tdp` database, two `tdp server` processes given both hosts in one DATABASE_URL, an
 * application with a one-step workflow (`test.echo`, run by support.ts's worker process), and a client
 * that creates tasks at a steady rate, retrying a refused create on the other replica with the same
 * Idempotency-Key until one accepts it.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { newId } from '@tdp/protocol';
import { PostgresPair } from '../../../test/postgresPair.ts';
import { type TdpProcess, tdpProcess } from '../../../test/tdpProcess.ts';
import { freePort } from '../../cli/src/embeddedPostgres.ts';
import { connectDatabase, generateKeyringEntry, migrate } from '../../server/src/main.ts';
import { call, provisionEchoApplication } from './replicas.ts';

export interface Drill {
  pair: PostgresPair;
  servers: TdpProcess[];
  env: Record<string, string>;
  apiKey: string;
  workerKey: string;
  call: typeof call;
  close(): Promise<void>;
}

export async function startDrill(options: { synchronous: boolean }): Promise<Drill> {
  const adminToken = `tdpadm_pgdrill_${newId()}`;
  const env = {
    TDP_ADMIN_TOKEN: adminToken,
    TDP_SECRET_KEYS: generateKeyringEntry('pgdrill'),
    TDP_LEASE_CHECK_INTERVAL_MS: '500',
    // Beats every 2 s: an attempt the database lost the end of is released within seconds (leases.ts).
    TDP_WORKER_HEARTBEAT_TTL_MS: '6000',
  };
  const pair = await PostgresPair.start(options);
  const servers: TdpProcess[] = [];
  const close = async () => {
    await Promise.all(servers.map((server) => server.kill()));
    await pair.close();
  };
  try {
    const admin = connectDatabase({ url: pair.nodeUrl(pair.primary, 'postgres'), maxConnections: 1 });
    await admin.unsafe('CREATE DATABASE tdp').finally(() => admin.end());
    const migrator = connectDatabase({ url: pair.urlFor('tdp'), maxConnections: 1 });
    await migrate(migrator).finally(() => migrator.end());
    for (let i = 0; i < 2; i++)
      servers.push(tdpProcess({ databaseUrl: pair.urlFor('tdp'), port: await freePort(), env }));
    await Promise.all(servers.map((server) => server.start()));
    const { apiKey, workerKey } = await provisionEchoApplication(servers[0]!, adminToken, 'pg-drill', {
      maxAttempts: 5,
      initialBackoffMs: 200,
      maxBackoffMs: 1_000,
      multiplier: 2,
    });
    return { pair, servers, env, apiKey, workerKey, call, close };
  } catch (error) {
    await close();
    throw error;
  }
}

/** Creates task `name` (key `create-<name>`) until a replica accepts it, alternating replicas. */
export async function createUntilAccepted(
  drill: Drill,
  name: string,
  deadline: number,
): Promise<{ id: string; tries: number; replayed: boolean }> {
  for (let tries = 1; ; tries++) {
    const server = drill.servers[tries % drill.servers.length]!;
    const created = await drill
      .call(
        server,
        'POST',
        '/v1/tasks',
        drill.apiKey,
        { workflowName: 'echo-wf', workflowVersion: '1', name, input: { text: name, delayMs: 50 } },
        `create-${name}`,
      )
      .catch(() => null);
    if (created && (created.status === 201 || created.status === 200))
      return { id: created.body.task.id as string, tries, replayed: created.replayed };
    if (Date.now() > deadline) throw new Error(`${name} was never accepted (last: ${created?.status})`);
    await sleep(200);
  }
}

export interface Load {
  /** Task id by name, as the client saw each accepted. */
  accepted: Map<string, string>;
  acceptedAt: number[];
  /** Creates that needed more than one try. */
  retried: number;
}

/** `total` creates, `perSecond`, each retried until accepted; `fault` runs alongside. */
export async function createUnderLoad(
  drill: Drill,
  options: { total: number; perSecond: number },
  fault: () => Promise<void>,
): Promise<Load> {
  const load: Load = { accepted: new Map(), acceptedAt: [], retried: 0 };
  const deadline = Date.now() + 90_000;
  const creating = (async () => {
    const pending: Promise<void>[] = [];
    for (let i = 0; i < options.total; i++) {
      const name = `t-${String(i).padStart(4, '0')}`;
      pending.push(
        createUntilAccepted(drill, name, deadline).then(({ id, tries }) => {
          load.accepted.set(name, id);
          load.acceptedAt.push(Date.now());
          if (tries > 1) load.retried += 1;
        }),
      );
      await sleep(1_000 / options.perSecond);
    }
    await Promise.all(pending);
  })();
  await Promise.all([creating, fault()]);
  return load;
}

/** How many of `ids` the API shows SUCCEEDED. */
export async function succeeded(drill: Drill, ids: string[]): Promise<number> {
  let done = 0;
  for (const id of ids) {
    const view = await drill
      .call(drill.servers[0]!, 'GET', `/v1/tasks/${id}`, drill.apiKey)
      .catch(() => null);
    if (view?.body?.task?.lifecycleStatus === 'SUCCEEDED') done += 1;
  }
  return done;
}

/** By SQL on `url`: every task's name and id, and how many STEP_COMPLETED events each has. */
export async function tasksInDatabase(
  url: string,
): Promise<{ name: string; id: string; completed: number }[]> {
  const sql = connectDatabase({ url, maxConnections: 1 });
  try {
    return await sql<{ name: string; id: string; completed: number }[]>`
      SELECT t.name, t.id::text AS id,
             count(*) FILTER (WHERE e.type = 'STEP_COMPLETED')::int AS completed
      FROM task t LEFT JOIN task_event e ON e.task_id = t.id
      GROUP BY t.id`;
  } finally {
    await sql.end();
  }
}

/**
 * A Redis master, one replica and three sentinels (quorum 2) as processes of the test, on 127.0.0.1 and
 * free ports, for failover drills. Under CI a missing `redis-server` fails the test instead of skipping.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createConnection, createServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { freePort } from '../../cli/src/embeddedPostgres.ts';

export const masterName = 'tdpmaster';

/** Whether the binaries are here; under CI their absence is an error, not a reason to skip. */
export function requireSentinelBinaries(): boolean {
  const found = spawnSync('redis-server', ['--version']).error === undefined;
  if (!found && process.env.CI)
    throw new Error('redis-server (and redis-sentinel) are required under CI: run scripts/services.sh');
  return found;
}

/** `redis-sentinel` when installed, else `redis-server --sentinel` (the same program). */
const sentinelCommand = (config: string): [string, string[]] =>
  spawnSync('redis-sentinel', ['--version']).error === undefined
    ? ['redis-sentinel', [config]]
    : ['redis-server', [config, '--sentinel']];

async function until(
  what: string,
  check: () => Promise<boolean>,
  timeoutMs = 20_000,
  explain: () => string = () => '',
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check().catch(() => false)) return;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}${explain()}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** The last lines of a process's log, for a failure message that says why. */
function logTail(file: string): string {
  if (!existsSync(file)) return '';
  const lines = readFileSync(file, 'utf8').trimEnd().split('\n').slice(-15);
  return `\n--- ${file} ---\n${lines.join('\n')}`;
}

/** A short-lived connection for one question (no retries: a process that is down answers false). */
async function ask<T>(port: number, question: (redis: Redis) => Promise<T>): Promise<T> {
  const redis = new Redis({ host: '127.0.0.1', port, lazyConnect: true, retryStrategy: () => null });
  redis.on('error', () => {});
  try {
    await redis.connect();
    return await question(redis);
  } finally {
    redis.disconnect();
  }
}

export interface SentinelCluster {
  masterPort: number;
  replicaPort: number;
  sentinels: { host: string; port: number }[];
  /**
   * The replica stops receiving the master's writes (its replication link, through a proxy here, is
   * held): what is written from now on is lost when the master dies, as with asynchronous replication.
   */
  holdReplication(): void;
  /** SIGKILLs the master (and cuts the held replication link). */
  killMaster(): void;
  /** The port of the master the sentinels name now. */
  currentMasterPort(): Promise<number>;
  stop(): Promise<void>;
}

export async function startSentinelCluster(): Promise<SentinelCluster> {
  const dir = mkdtempSync(join(tmpdir(), 'tdp-sentinel-'));
  const processes: ChildProcess[] = [];
  const run = (command: string, args: string[]) => {
    const child = spawn(command, args, { stdio: 'ignore' });
    child.on('error', () => {});
    processes.push(child);
    return child;
  };
  /**
   * Starts a server on a port that is free now, and waits until it answers. The port is chosen right
   * before the start, and another one is tried when the process exits: while the tests run in parallel,
   * an ephemeral port can be taken by another test's outgoing connection at any moment.
   */
  const startOnFreePort = async (start: (port: number) => ChildProcess): Promise<number> => {
    for (let attempt = 1; ; attempt += 1) {
      const port = await freePort();
      const child = start(port);
      try {
        await until(`the process on port ${port} to answer`, async () => {
          if (child.exitCode !== null || child.signalCode !== null) throw new Error('exited');
          return (await ask(port, (r) => r.ping())) === 'PONG';
        });
        if (child.exitCode === null && child.signalCode === null) return port;
      } catch (error) {
        if (attempt >= 5) throw error;
      }
      if (child.exitCode === null) child.kill('SIGKILL');
    }
  };
  const server = (port: number, extra: string[] = []) =>
    run('redis-server', [
      '--port',
      String(port),
      '--bind',
      '127.0.0.1',
      '--save',
      '',
      '--appendonly',
      'no',
      '--dir',
      dir,
      '--logfile',
      join(dir, `redis-${port}.log`),
      ...extra,
    ]);
  let master!: ChildProcess;
  const masterPort = await startOnFreePort((port) => {
    master = server(port);
    return master;
  });
  // The replica replicates through a proxy, so that the test can hold its link.
  const links: { upstream: Socket; downstream: Socket }[] = [];
  const proxy = createServer((downstream) => {
    const upstream = createConnection({ host: '127.0.0.1', port: masterPort });
    links.push({ upstream, downstream });
    for (const socket of [upstream, downstream]) socket.on('error', () => {});
    upstream.pipe(downstream);
    downstream.pipe(upstream);
    upstream.on('close', () => downstream.destroy());
    downstream.on('close', () => upstream.destroy());
  });
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
  const proxyPort = (proxy.address() as { port: number }).port;
  const replicaPort = await startOnFreePort((port) =>
    server(port, ['--replicaof', '127.0.0.1', String(proxyPort)]),
  );
  // The sentinels find the replica in the master's INFO: it must be attached before they start.
  await until('the replica to attach', () =>
    ask(masterPort, async (r) => /slave0:.*state=online/.test(await r.info('replication'))),
  );
  const sentinelPorts: number[] = [];
  for (let i = 0; i < 3; i += 1)
    sentinelPorts.push(
      await startOnFreePort((port) => {
        const config = join(dir, `sentinel-${port}.conf`);
        writeFileSync(
          config,
          [
            `port ${port}`,
            'bind 127.0.0.1',
            `dir ${dir}`,
            `logfile ${join(dir, `sentinel-${port}.log`)}`,
            `sentinel monitor ${masterName} 127.0.0.1 ${masterPort} 2`,
            `sentinel down-after-milliseconds ${masterName} 1000`,
            `sentinel failover-timeout ${masterName} 3000`,
            `sentinel parallel-syncs ${masterName} 1`,
            '',
          ].join('\n'),
        );
        const [command, args] = sentinelCommand(config);
        return run(command, args);
      }),
    );
  // Each sentinel must know the replica and the two others (hello messages, every 2 s) to fail over.
  for (const port of sentinelPorts)
    await until(
      `sentinel ${port} to see the replica and its peers`,
      () =>
        ask(port, async (r) => {
          const replicas = (await r.call('SENTINEL', 'REPLICAS', masterName)) as unknown[];
          const peers = (await r.call('SENTINEL', 'SENTINELS', masterName)) as unknown[];
          return replicas.length === 1 && peers.length === 2;
        }),
      20_000,
      () => logTail(join(dir, `sentinel-${port}.log`)),
    );
  return {
    masterPort,
    replicaPort,
    sentinels: sentinelPorts.map((port) => ({ host: '127.0.0.1', port })),
    holdReplication: () => {
      for (const { upstream } of links) upstream.unpipe();
    },
    killMaster: () => {
      master.kill('SIGKILL');
      proxy.close();
      for (const { upstream, downstream } of links) {
        upstream.destroy();
        downstream.destroy();
      }
    },
    currentMasterPort: () =>
      ask(sentinelPorts[0]!, async (r) => {
        const address = (await r.call('SENTINEL', 'GET-MASTER-ADDR-BY-NAME', masterName)) as string[];
        return Number(address[1]);
      }),
    stop: async () => {
      proxy.close();
      for (const { upstream, downstream } of links) {
        upstream.destroy();
        downstream.destroy();
      }
      for (const child of processes) if (child.exitCode === null) child.kill('SIGKILL');
      await Promise.all(
        processes.map((child) =>
          child.exitCode !== null || child.signalCode !== null
            ? undefined
            : new Promise((resolve) => child.once('exit', resolve)),
        ),
      );
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export { until };

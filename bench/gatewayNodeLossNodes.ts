/**
 * The two realtime nodes of the gateway-node-loss drill (bench/gatewayNodeLoss.ts), on one Redis with a
 * key prefix of their own: `tdp gateway --config` processes reading the Centrifugo config TDP prints, or
 * real Centrifugo v6 processes (test/centrifugo.ts) with the same config.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../packages/cli/src/embeddedPostgres.ts';
import { centrifugoConfig, defaultSettings } from '../packages/server/src/main.ts';
import { requireCentrifugo, startCentrifugo } from '../test/centrifugo.ts';

export type Kind = 'gateway' | 'centrifugo';
export const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';

export interface Node {
  port: number;
  kill(): void;
  stop(): Promise<void>;
}

/** A `tdp gateway` process reading the Centrifugo config TDP prints, with the Redis engine. */
async function startGatewayNode(config: Record<string, unknown>): Promise<Node> {
  const port = await freePort();
  const directory = await mkdtemp(join(tmpdir(), 'tdp-node-loss-'));
  const file = join(directory, 'config.json');
  await writeFile(file, JSON.stringify({ ...config, http_server: { address: '127.0.0.1', port } }));
  const child: ChildProcess = spawn(
    process.execPath,
    ['--conditions=@tdp/source', '--import', 'tsx', 'packages/cli/src/main.ts', 'gateway', '--config', file],
    { env: { ...process.env, TDP_LOG_LEVEL: 'warn' }, stdio: ['ignore', 'inherit', 'inherit'] },
  );
  const exited = new Promise((resolve) => child.once('exit', resolve));
  const deadline = Date.now() + 30_000;
  while (
    !(await fetch(`http://127.0.0.1:${port}/health`).then(
      (r) => r.ok,
      () => false,
    ))
  ) {
    if (Date.now() > deadline || child.exitCode !== null) throw new Error('tdp gateway did not start');
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return {
    port,
    kill: () => child.kill('SIGKILL'),
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await exited;
      await rm(directory, { recursive: true, force: true });
    },
  };
}

export async function startNodes(kind: Kind, tokenSecret: string, apiKey: string, prefix: string) {
  const redis = { url: REDIS_URL, prefix };
  if (kind === 'centrifugo') {
    const binary = requireCentrifugo();
    if (!binary) throw new Error('no Centrifugo binary: scripts/services.sh builds ~/go/bin/centrifugo');
    return Promise.all(
      [1, 2].map(async () => {
        const node = await startCentrifugo({ binary, tokenSecret, apiKey, redis });
        return {
          port: Number(new URL(node.url).port),
          kill: () => process.kill(node.pid, 'SIGKILL'),
          stop: () => node.stop(),
        };
      }),
    );
  }
  const config = centrifugoConfig({
    tokenSecret,
    apiKey,
    realtimeHistory: defaultSettings.realtimeHistory,
    redis,
    listen: { address: '127.0.0.1', port: 0 },
  });
  return Promise.all([1, 2].map(() => startGatewayNode(config)));
}

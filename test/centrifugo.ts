/**
 * A real Centrifugo v6 process for tests, configured by the same `centrifugoConfig` that
 * `tdp centrifugo-config` prints: TDP's token secret, a server API key, a namespace with history and
 * recovery for every channel prefix TDP publishes to. scripts/services.sh (and so .ci/run) builds the
 * binary; without it a test skips, except under CI, where it fails.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../packages/cli/src/embeddedPostgres.ts';
import { type CentrifugoSettings, centrifugoConfig, defaultSettings } from '../packages/server/src/main.ts';
import { goBinary } from './goBinary.ts';

/** Where scripts/services.sh puts it (`go install`: GOBIN, else GOPATH/bin, `~/go/bin` by default); CENTRIFUGO_BIN wins. */
export function centrifugoBinary(): string | null {
  return goBinary('centrifugo', process.env.CENTRIFUGO_BIN);
}

/** The binary, or null to skip; under CI a missing binary throws (the test file fails). */
export function requireCentrifugo(): string | null {
  const binary = centrifugoBinary();
  if (!binary && process.env.CI)
    throw new Error(
      'Centrifugo is required under CI: run scripts/services.sh (it builds ~/go/bin/centrifugo)',
    );
  return binary;
}

export interface CentrifugoProcess {
  /** `http://127.0.0.1:<port>` */
  url: string;
  /** What the SDK connects to. */
  wsUrl: string;
  /** What CENTRIFUGO_API_URL is set to, with `apiKey` as CENTRIFUGO_API_KEY. */
  apiUrl: string;
  apiKey: string;
  /** The process id (the realtime bench reads its memory from /proc). */
  pid: number;
  /** What Centrifugo printed (for a failing test's message). */
  output(): string;
  stop(): Promise<void>;
}

/** A fresh secret of the length Centrifugo and TDP ask for. */
export const newTokenSecret = () => randomBytes(32).toString('hex');

export async function startCentrifugo(options: {
  binary: string;
  tokenSecret: string;
  apiKey?: string;
  /** Several nodes on the same Redis `prefix` serve the same channels. */
  redis?: CentrifugoSettings['redis'];
  realtimeHistory?: CentrifugoSettings['realtimeHistory'];
  /** Origins of the pages a browser connects from (patterns, e.g. `http://127.0.0.1:*`). */
  allowedOrigins?: string[];
  readyWithinMs?: number;
}): Promise<CentrifugoProcess> {
  const port = await freePort();
  const apiKey = options.apiKey ?? `centrifugo-api-${randomBytes(8).toString('hex')}`;
  const config = {
    ...centrifugoConfig({
      tokenSecret: options.tokenSecret,
      apiKey,
      realtimeHistory: options.realtimeHistory ?? defaultSettings.realtimeHistory,
      redis: options.redis ?? null,
      ...(options.allowedOrigins ? { allowedOrigins: options.allowedOrigins } : {}),
      listen: { address: '127.0.0.1', port },
    }),
    log: { level: 'warn' },
  };
  const directory = await mkdtemp(join(tmpdir(), 'tdp-centrifugo-'));
  const configFile = join(directory, 'config.json');
  await writeFile(configFile, JSON.stringify(config, null, 2));
  const child: ChildProcess = spawn(options.binary, ['--config', configFile], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { PATH: process.env.PATH ?? '', HOME: directory },
  });
  let output = '';
  const collect = (chunk: Buffer) => {
    output += chunk.toString();
  };
  child.stdout!.on('data', collect);
  child.stderr!.on('data', collect);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const url = `http://127.0.0.1:${port}`;
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    await exited;
    await rm(directory, { recursive: true, force: true });
  };
  const deadline = Date.now() + (options.readyWithinMs ?? 15_000);
  for (;;) {
    if (child.exitCode !== null) {
      await stop();
      throw new Error(`Centrifugo exited with ${child.exitCode}:\n${output}`);
    }
    const healthy = await fetch(`${url}/health`)
      .then((response) => response.ok)
      .catch(() => false);
    if (healthy) break;
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`Centrifugo did not answer /health on ${url}:\n${output}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return {
    url,
    wsUrl: `ws://127.0.0.1:${port}/connection/websocket`,
    apiUrl: `${url}/api`,
    apiKey,
    pid: child.pid!,
    output: () => output,
    stop,
  };
}

/**
 * The harness options of a TDP server in Centrifugo mode: it publishes to `publishTo`'s API and hands
 * out tokens signed with `tokenSecret` for `wsUrl` (another node of the same cluster, by default this one).
 */
export function centrifugoMode(publishTo: CentrifugoProcess, tokenSecret: string, wsUrl = publishTo.wsUrl) {
  return {
    centrifugoApi: { url: publishTo.apiUrl, key: publishTo.apiKey },
    realtimeTokenSecret: tokenSecret,
    realtimeWsUrl: wsUrl,
  };
}

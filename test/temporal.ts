/**
 * A real Temporal development server for tests (`temporal server start-dev`, in memory, headless, on
 * 127.0.0.1). scripts/services.sh (and so .ci/run) builds the Temporal CLI from the Go module proxy; without
 * it a test skips, except under CI, where it fails.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { freePort } from '../packages/cli/src/embeddedPostgres.ts';
import { newId } from '../packages/protocol/src/ids.ts';
import type { TemporalSettings } from '../packages/server/src/adapters/temporal/temporalEngine.ts';
import { goBinary } from './goBinary.ts';
import { natsUrl } from './nats.ts';

/** Where scripts/services.sh puts it (GOBIN, else GOPATH/bin, `~/go/bin` by default); TEMPORAL_BIN wins. */
export function temporalBinary(): string | null {
  return goBinary('temporal', process.env.TEMPORAL_BIN);
}

/** The binary, or null to skip; under CI a missing binary throws (the test file fails). */
export function requireTemporal(): string | null {
  const binary = temporalBinary();
  if (!binary && process.env.CI)
    throw new Error('Temporal is required under CI: run scripts/services.sh (it builds ~/go/bin/temporal)');
  return binary;
}

export interface TemporalProcess {
  /** `127.0.0.1:<port>`, what TEMPORAL_ADDRESS is set to. */
  address: string;
  /** The server's process id (the e2e bench reads its CPU time from /proc). */
  pid: number;
  output(): string;
  /** SIGTERM by default; SIGKILL for a crash (with `dbFile`, what it committed survives it). */
  stop(signal?: NodeJS.Signals): Promise<void>;
}

export async function startTemporal(
  binary: string,
  options: {
    port?: number;
    readyWithinMs?: number;
    /** Its SQLite file (`--db-filename`), so a restart on it finds its workflows; in memory by default. */
    dbFile?: string;
  } = {},
): Promise<TemporalProcess> {
  const port = options.port ?? (await freePort());
  const readyWithinMs = options.readyWithinMs ?? 60_000;
  const address = `127.0.0.1:${port}`;
  const child: ChildProcess = spawn(
    binary,
    [
      ...['server', 'start-dev', '--headless', '--ip', '127.0.0.1', '--port', String(port)],
      ...['--log-level', 'warn', ...(options.dbFile ? ['--db-filename', options.dbFile] : [])],
      // TDP asks for eager starts; said here so a server whose default differs gives them too.
      ...['--dynamic-config-value', 'system.enableEagerWorkflowStart=true'],
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => {
    output += chunk.toString();
  });
  child.stderr!.on('data', (chunk: Buffer) => {
    output += chunk.toString();
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const stop = async (signal: NodeJS.Signals = 'SIGTERM') => {
    if (child.exitCode === null && child.signalCode === null) child.kill(signal);
    await exited;
  };
  const deadline = Date.now() + readyWithinMs;
  for (;;) {
    // Serving once the `default` namespace answers (the dev server registers it at start).
    const health = spawn(
      binary,
      ['operator', 'namespace', 'describe', '--address', address, '-n', 'default'],
      {
        stdio: 'ignore',
      },
    );
    const code = await new Promise<number | null>((resolve) => health.once('exit', resolve));
    if (code === 0) break;
    if (child.exitCode !== null || Date.now() > deadline) {
      await stop();
      throw new Error(`the Temporal dev server did not start on ${address}:\n${output}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  return { address, pid: child.pid!, output: () => output, stop };
}

/**
 * The harness options of a server on the Temporal engine at `address`: NATS with a subject prefix (so
 * its own stream) and a task queue of its own, so servers in one test run never share either.
 */
export function onTemporal(
  address: string,
  sweep: Pick<TemporalSettings, 'sweepIntervalMs' | 'sweepIdleMs'> = {},
) {
  const prefix = `t${newId().replaceAll('-', '').slice(0, 11)}`;
  return {
    nats: { url: natsUrl, subjectPrefix: prefix },
    temporal: {
      address,
      namespace: 'default',
      taskQueue: `tdp-${prefix}`,
      ...sweep,
    } satisfies TemporalSettings,
  };
}

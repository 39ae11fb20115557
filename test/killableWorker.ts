/**
 * A test worker in its own process (test/workerProcess.ts), so a test can kill it with SIGKILL
 * mid-attempt; and the clock moves that let the lease reaper find it gone while live workers stay.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { TestClock } from './harness.ts';

export interface KillableWorker {
  child: ChildProcess;
  exited: Promise<void>;
  /** The next JSON line it prints: `{ workerId }` once registered, then `{ started: command }` per attempt. */
  next(): Promise<Record<string, unknown>>;
}

export function spawnWorkerProcess(
  baseUrl: string,
  workerKey: string,
  nodeId: string,
  capability: string,
): KillableWorker {
  const child = spawn(
    process.execPath,
    [
      '--conditions=@tdp/source',
      '--import',
      'tsx',
      fileURLToPath(new URL('./workerProcess.ts', import.meta.url)),
      baseUrl,
      workerKey,
      nodeId,
      capability,
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  const lines = createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return {
    child,
    exited,
    next: async () => {
      const line = await lines.next();
      if (line.done) throw new Error('the worker process ended');
      return JSON.parse(line.value);
    },
  };
}

/**
 * Moves the clock forward by `ms` in steps of at most 15 s, the `alive` workers beating after each: the
 * lease reaper (every 2 s, any time) never sees them older than their 30 s TTL, while a worker that
 * stopped beating is past it at the end.
 */
export async function advanceBeating(
  clock: TestClock,
  ms: number,
  alive: { heartbeat(): Promise<unknown> }[],
): Promise<void> {
  for (let left = ms; left > 0; left -= 15_000) {
    clock.advance(Math.min(left, 15_000));
    for (const worker of alive) await worker.heartbeat();
  }
}

/**
 * Waiting for a task to end, so the caller's code never polls. The SDK polls `GET /v1/tasks/{id}` with a
 * growing pause: the server's live stream (`GET /v1/me/task-stream`) takes a user token that sees the
 * task and a watch set, not the application's API key, so following it would cost a token, an ACL
 * grant and an SSE parser for what a few reads do.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { LifecycleStatus, TaskWithExecution } from '@tdp/protocol';
import { TdpWaitTimeoutError } from './errors.ts';

/** The lifecycle statuses a task ends in (a `retryTask` may start it again). */
export const terminalStatuses: ReadonlySet<LifecycleStatus> = new Set([
  'SUCCEEDED',
  'FAILED',
  'CANCELLED',
  'TIMED_OUT',
]);

export interface WaitForTaskOptions {
  /** How long to wait in all, reads and pauses included; then `TdpWaitTimeoutError`. */
  timeoutMs: number;
  /** Stops the wait (rejects with the signal's reason). */
  signal?: AbortSignal;
  /** The longest pause between two reads (default 2 000 ms); the first is 100 ms, then it grows. */
  maxPollIntervalMs?: number;
}

const firstPollMs = 100;
const defaultMaxPollMs = 2_000;

/**
 * Reads the task until its lifecycle status is terminal and resolves with that view. Each read is
 * retried as reads are (transport.ts); a read that fails for good (e.g. TASK_NOT_FOUND) rejects at once.
 */
export async function waitForTerminal(
  read: (signal: AbortSignal) => Promise<TaskWithExecution>,
  taskId: string,
  options: WaitForTaskOptions,
): Promise<TaskWithExecution> {
  const deadline = AbortSignal.timeout(options.timeoutMs);
  const signal = options.signal ? AbortSignal.any([options.signal, deadline]) : deadline;
  const maxPollMs = options.maxPollIntervalMs ?? defaultMaxPollMs;
  let lastSeen: TaskWithExecution | null = null;
  try {
    for (let pause = firstPollMs; ; pause = Math.min(pause * 2, maxPollMs)) {
      lastSeen = await read(signal);
      if (terminalStatuses.has(lastSeen.task.lifecycleStatus)) return lastSeen;
      await sleep(pause, undefined, { signal });
    }
  } catch (error) {
    if (options.signal?.aborted) throw options.signal.reason;
    if (deadline.aborted) throw new TdpWaitTimeoutError(taskId, options.timeoutMs, lastSeen);
    throw error;
  }
}

/**
 * The two heartbeats: the session's (at the interval the server gave, with the runtime state) and the
 * running attempts' (for steps with a heartbeat timeout), and the drain that heartbeats announce.
 */
import { RejectedError, UnavailableError } from './client.ts';
import type { Executor } from './executor.ts';
import type { RuntimeParts } from './loops.ts';
import type { Sender } from './sender.ts';
import type { Session } from './session.ts';

export interface HeartbeatDeps extends RuntimeParts {
  executor: Executor;
  sessionLost: (reason: string) => Promise<void>;
  /** The worker key is refused: attempt heartbeats wait (the runtime tries the key again). */
  keyRefused: () => boolean;
}

export class Heartbeats {
  constructor(private readonly deps: HeartbeatDeps) {}

  async sessionLoop(): Promise<void> {
    const { lifecycle, session } = this.deps;
    while (!lifecycle.stopped) {
      await lifecycle.sleep(session.heartbeatIntervalMs);
      if (lifecycle.stopped) return;
      try {
        await session.heartbeat();
      } catch (error) {
        if (error instanceof RejectedError) await this.deps.sessionLost(error.message);
        else if (!(error instanceof UnavailableError)) throw error;
      }
    }
  }

  /**
   * Attempt heartbeats, batched: every second, one request for the running attempts whose interval (from
   * their START_ATTEMPT, 10 s by default) has passed. The sequence is the clock in ms, so it keeps rising
   * across a restart (the server ignores a sequence not above the last one it saw).
   */
  async attemptLoop(): Promise<void> {
    const { lifecycle } = this.deps;
    while (!lifecycle.stopped) {
      await lifecycle.sleep(1_000);
      const now = Date.now();
      const due = this.deps.executor
        .runningAttempts()
        .filter(
          (r) =>
            r.local.executionToken && now - r.lastBeatAt >= (r.local.heartbeatIntervalSeconds ?? 10) * 1000,
        );
      if (due.length === 0 || this.deps.keyRefused()) continue;
      for (const r of due) r.lastBeatAt = now;
      await (this.deps.options.reporting ?? this.deps.options.client)
        .attemptHeartbeats(due.map((r) => ({ executionToken: r.local.executionToken!, heartbeatSeq: now })))
        .catch((error) =>
          this.deps.logger.warn({ err: (error as Error).message }, 'attempt heartbeats not sent'),
        );
    }
  }
}

/**
 * Drains: takes nothing new, lets running attempts finish within the grace period, hands back the rest
 * (a retryable failure, so they run elsewhere), delivers what is in the outbox; the caller then stops.
 */
export async function drain(
  parts: { session: Session; executor: Executor; sender: Sender },
  graceMs: number,
): Promise<void> {
  const { session, executor, sender } = parts;
  session.startDraining();
  await session.heartbeat().catch(() => {});
  executor.handBackWaiting();
  const all = executor.settled();
  const timer = new Promise<'late'>((resolve) => setTimeout(() => resolve('late'), graceMs).unref());
  if ((await Promise.race([all.then(() => 'done' as const), timer])) === 'late') {
    executor.abortAll('HANDED_BACK');
    await all;
  }
  await sender.flush(Math.min(graceMs, 10_000));
  session.drained();
}

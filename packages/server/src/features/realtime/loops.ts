/** The realtime feature's loops: the relay of committed rows, and the follower of other replicas' rows. */
import type { Logger } from 'pino';
import type { CommittedProjectionFollower } from '../../core/realtime/follower.ts';
import { type RelayDeps, relayRealtime } from '../../core/realtime/relay.ts';
import type { Clock } from '../../core/shared/ports.ts';
import { type LoopRetry, type Paced, pace, WakeableLoop } from '../../host/loops/wakeableLoop.ts';

/** Publishes committed realtime projections to the gateway, in commit order. */
export function createRealtimeLoop(deps: RelayDeps & Paced & { logger: Logger }): WakeableLoop {
  const batch = deps.pacing.batchSize;
  return new WakeableLoop({
    name: 'realtime',
    logger: deps.logger,
    now: () => deps.clock.now(),
    ...pace(deps),
    round: async () => ({ full: (await relayRealtime(deps, batch)) === batch }),
    nextDueAt: async () => null,
  });
}

/**
 * Feeds this replica's gateway (its task streams) from the realtime rows every replica committed, when
 * Centrifugo serves the browsers: woken by this process's commits, else every `pollMs`.
 */
export function createProjectionFollowLoop(deps: {
  follower: CommittedProjectionFollower;
  batchSize: number;
  pollMs: number;
  logger: Logger;
  clock: Clock;
  retry: LoopRetry;
}): WakeableLoop {
  return new WakeableLoop({
    name: 'realtime-follow',
    logger: deps.logger,
    now: () => deps.clock.now(),
    maxIdleMs: deps.pollMs,
    batchWindowMs: 0,
    retry: deps.retry,
    round: async () => ({ full: (await deps.follower.round()) === deps.batchSize }),
    nextDueAt: async () => null,
  });
}

import type { Logger } from 'pino';
import { PostgresCommittedProjections } from '../../adapters/outbound/postgres/committedProjections.ts';
import type { Sql } from '../../adapters/outbound/postgres/database.ts';
import { CentrifugoApiPublisher, gatewayPublisher } from '../../adapters/outbound/realtime/publishers.ts';
import type { RealtimeHandoffMode } from '../../core/facts/ports.ts';
import { CommittedProjectionFollower } from '../../core/realtime/follower.ts';
import type { RealtimePublisher } from '../../core/realtime/relay.ts';
import type { Clock } from '../../core/shared/ports.ts';
import type { LoopOptions } from '../../host/host.ts';
import type { WakeableLoop } from '../../host/loops/wakeableLoop.ts';
import type { RealtimeSettings } from './settings.ts';

/** Where realtime messages go: a Centrifugo-compatible server API when configured, else this gateway. */
export function realtimePublisher(
  config: Pick<RealtimeSettings, 'centrifugoApiUrl' | 'centrifugoApiKey'>,
  gateway: Parameters<typeof gatewayPublisher>[0],
): RealtimePublisher {
  return config.centrifugoApiUrl && config.centrifugoApiKey
    ? new CentrifugoApiPublisher(config.centrifugoApiUrl, config.centrifugoApiKey)
    : gatewayPublisher(gateway);
}

/**
 * A gateway that outlives this process (Redis, or reached over HTTP) gets what the hand-off could not
 * publish from the relay's loop after `realtimeHandoffGraceMs`; the in-process memory gateway dies with
 * the process, and its clients then reload snapshots, so its rows are not stored at all.
 */
export function realtimeHandoffMode(
  config: Pick<
    RealtimeSettings,
    'redisUrl' | 'redisSentinel' | 'centrifugoApiUrl' | 'realtimeHandoffGraceMs'
  >,
): RealtimeHandoffMode {
  return config.redisUrl || config.redisSentinel || config.centrifugoApiUrl
    ? { kind: 'durable', graceMs: config.realtimeHandoffGraceMs }
    : { kind: 'memoryOnly' };
}

/**
 * How long a replica's follower keeps reading after its last task stream closed: a reconnect within it
 * resumes from Last-Event-ID (the gateway's own history holds 10 minutes).
 */
const followerIdleAfterMs = 5 * 60_000;

/** True when Centrifugo (or another gateway reached over HTTP), not this process, serves the browsers. */
export const publishesElsewhere = (config: Pick<RealtimeSettings, 'centrifugoApiUrl' | 'centrifugoApiKey'>) =>
  Boolean(config.centrifugoApiUrl && config.centrifugoApiKey);

/**
 * When the relay publishes elsewhere, this replica's gateway would hear nothing, and its task streams
 * would go silent: a loop feeds it from what every replica committed (`core/realtime/follower.ts`).
 * Whether this replica runs the background loops or not, since it serves streams either way.
 */
export async function projectionFollowLoop(
  settings: Pick<
    RealtimeSettings,
    'centrifugoApiUrl' | 'centrifugoApiKey' | 'realtimeFollowPollMs' | 'realtimeLoop'
  >,
  deps: {
    sql: Sql;
    gateway: Parameters<typeof gatewayPublisher>[0] & { stats(): { num_clients: number } };
    clock: Clock;
    logger: Logger;
    loop: (options: LoopOptions) => WakeableLoop;
  },
): Promise<WakeableLoop | null> {
  if (!publishesElsewhere(settings)) return null;
  const batchSize = settings.realtimeLoop.batchSize;
  const follower = new CommittedProjectionFollower({
    reads: new PostgresCommittedProjections(deps.sql),
    local: gatewayPublisher(deps.gateway),
    batchSize,
    onRefused: (error) =>
      deps.logger.warn(
        { loop: 'realtime-follow', error },
        "this replica's gateway refused a realtime message",
      ),
    // Its clients are this replica's task streams (browsers are on Centrifugo).
    listening: () => deps.gateway.stats().num_clients > 0,
    idleAfterMs: followerIdleAfterMs,
    now: () => deps.clock.now().getTime(),
  });
  await follower.begin();
  // Woken by this process's commits (and other replicas' NOTIFYs), else every `realtimeFollowPollMs`.
  return deps.loop({
    name: 'realtime-follow',
    maxIdleMs: settings.realtimeFollowPollMs,
    batchWindowMs: 0,
    round: async () => ({ full: (await follower.round()) === batchSize }),
  });
}

/** The PostgreSQL channel follow loops LISTEN on: a replica committed realtime rows. */
export const realtimeCommittedChannel = 'tdp_realtime_committed';

/**
 * After a commit with realtime rows: wakes this process's follow loop at once and tells the other
 * replicas' with a NOTIFY sent after the commit (never inside it), at most one per `intervalMs` — the
 * first at once, the commits during the interval in one more at its end. The loops' poll stays the net
 * under a lost NOTIFY.
 */
export class FollowerWakeup {
  private quietUntil = 0;
  private trailing = false;

  constructor(
    private readonly loop: WakeableLoop,
    private readonly notify: () => Promise<unknown>,
    private readonly intervalMs: number,
  ) {}

  committed(): void {
    this.loop.wake();
    if (this.trailing) return;
    if (performance.now() >= this.quietUntil) {
      this.quietUntil = performance.now() + this.intervalMs;
      // The commits that end in this turn of the event loop share it.
      setImmediate(() => this.send());
      return;
    }
    this.trailing = true;
    setTimeout(() => {
      this.trailing = false;
      this.quietUntil = performance.now() + this.intervalMs;
      this.send();
    }, this.quietUntil - performance.now()).unref();
  }

  private send(): void {
    this.notify().catch(() => {});
  }
}

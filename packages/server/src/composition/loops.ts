/** The composition root, part 4: the background loops, and the wake-ups that reach them. */
import { callbackPoster } from '../adapters/outbound/http/callbackPoster.ts';
import { PostgresNotificationDeliveries } from '../adapters/outbound/postgres/notificationStore.ts';
import { ClaimableRows } from '../adapters/outbound/postgres/outboxQueue.ts';
import { PostgresTraceContexts } from '../adapters/outbound/postgres/traceContexts.ts';
import type { ServerConfig } from '../config.ts';
import { RealtimeHandoff } from '../core/realtime/handoff.ts';
import { HealthReconciler } from '../core/status/healthReconciler.ts';
import { createChartSamplerLoop } from '../loops/chartSamplerLoop.ts';
import { createHealthLoop } from '../loops/healthLoop.ts';
import { createOutboxLoop } from '../loops/outboxLoop.ts';
import { createRetentionLoop } from '../loops/retentionLoop.ts';
import {
  createBulkJobLoop,
  createCallbackLoop,
  createLeaseLoop,
  createRealtimeLoop,
  createScheduleLoop,
  createSchedulerLoop,
  createTimerLoop,
} from '../loops/runLoops.ts';
import type { WakeableLoop } from '../loops/wakeableLoop.ts';
import { CallbackSigningSecrets } from '../wiring/callbackSigningSecrets.ts';
import { outboxChannel } from '../wiring/outboxWakeup.ts';
import { realtimeHandoffMode, realtimePublisher } from '../wiring/realtimeDelivery.ts';
import { retentionSweepDeps } from '../wiring/retention.ts';
import type { Adapters } from './adapters.ts';
import type { UseCases } from './useCases.ts';

export interface RunningLoops {
  /** Not started yet: the server starts them once it listens. */
  loops: WakeableLoop[];
  /** Stops listening for other processes' outbox NOTIFYs. */
  unlisten: () => Promise<void>;
}

/** Builds the loops and hands their wake-ups to the commit signal; none runs until started. */
export async function createLoops(config: ServerConfig, a: Adapters, uses: UseCases): Promise<RunningLoops> {
  const { clock, logger, metrics, signal, realtimeRows, callbackQueue } = a;
  const retry = config.loopRetry;
  const outboxLoop = createOutboxLoop({
    queue: a.outboxQueue,
    publisher: a.publisher,
    clock,
    logger: logger.child({ loop: 'outbox' }),
    pacing: config.loops.outbox,
    retry,
    observer: {
      published: (_event, committedAt, now) => {
        metrics.outboxPublished.inc();
        metrics.outboxLatency.observe(Math.max(0, now.getTime() - committedAt.getTime()) / 1000);
      },
      failed: (event, error, outcome) => {
        metrics.outboxFailed.labels(outcome ?? 'LOST_CLAIM').inc();
        logger.warn(
          { eventId: event.id, eventType: event.type, err: error, outcome },
          'outbox publication failed',
        );
      },
    },
  });
  const scheduler = createSchedulerLoop({
    ...uses.dispatch,
    logger: logger.child({ loop: 'scheduler' }),
    clock,
    pacing: config.loops.scheduler,
    retry,
  });
  const leases = createLeaseLoop({
    ...uses.dispatch,
    logger: logger.child({ loop: 'leases' }),
    clock,
    intervalMs: config.leaseCheckIntervalMs,
    retry,
  });
  const publisher = realtimePublisher(config, a.gateway);
  // With tracing on, publications and callbacks find their task's trace in its execution snapshot.
  const traces = config.tracing
    ? { tracing: a.tracing, contexts: new PostgresTraceContexts(a.sql) }
    : undefined;
  const realtimeObserver = {
    published: (committedAt: Date, now: Date) =>
      metrics.realtimeLatency.observe(Math.max(0, now.getTime() - committedAt.getTime()) / 1000),
    handedOff: (takenAt: Date, now: Date) =>
      metrics.realtimeHandoff.observe(Math.max(0, now.getTime() - takenAt.getTime()) / 1000),
    coalesced: (count: number) => metrics.realtimeCoalesced.inc(count),
    dead: (row: { id: string; channel: string }, error: string) => {
      metrics.realtimeDead.inc();
      logger.warn({ realtimeId: row.id, channel: row.channel, error }, 'realtime message went DEAD');
    },
  };
  const realtimeLoop = createRealtimeLoop({
    rows: realtimeRows,
    publisher,
    observer: realtimeObserver,
    ...(traces ? { traces } : {}),
    clock,
    logger: logger.child({ loop: 'realtime' }),
    pacing: config.loops.realtime,
    retry,
  });
  signal.realtimeHandoff = realtimeHandoffMode(config);
  signal.handoff = new RealtimeHandoff({
    publisher,
    ...(signal.realtimeHandoff.kind === 'durable' ? { rows: realtimeRows } : {}),
    clock,
    observer: realtimeObserver,
    tracing: a.tracing,
    onError: (error) => logger.warn({ err: error }, 'realtime hand-off failed; the relay loop will publish'),
  });
  const timerLoop = createTimerLoop({
    status: uses.timers,
    timers: new ClaimableRows(a.sql, 'timer'),
    logger: logger.child({ loop: 'timers' }),
    clock,
    pacing: config.loops.timers,
    retry,
  });
  const signingSecrets = new CallbackSigningSecrets(
    a.identityStore,
    a.secrets,
    clock,
    config.callbackSecretsCacheMs,
  );
  const callbackLoop = createCallbackLoop({
    queue: callbackQueue,
    rows: callbackQueue.rows,
    clock,
    logger: logger.child({ loop: 'callbacks' }),
    signingSecrets: (applicationId) => signingSecrets.of(applicationId),
    post: callbackPoster(config.callbackTimeoutMs),
    ...(traces ? { traces } : {}),
    ended: (delivery, outcome, traceId) =>
      logger.info(
        {
          traceId,
          taskId: delivery.taskId,
          executionId: delivery.executionId,
          outboxId: delivery.id,
          outcome,
        },
        'callback delivery',
      ),
    pacing: config.loops.callbacks,
    retry,
  });
  // Offline notifications go to the webhook, when one is configured, through the callback sender.
  const delivery = config.notificationDelivery;
  const notifications = delivery.webhookUrl
    ? new PostgresNotificationDeliveries(a.sql, delivery.webhookUrl, {
        leaseMs: delivery.timeoutMs * 2,
        maxAttempts: delivery.maxAttempts,
        maxBackoffSeconds: delivery.maxBackoffSeconds,
      })
    : null;
  const notificationLoop = notifications
    ? createCallbackLoop({
        name: 'notifications',
        queue: notifications,
        rows: notifications.rows,
        clock,
        logger: logger.child({ loop: 'notifications' }),
        signingSecrets: (applicationId) => signingSecrets.of(applicationId),
        post: callbackPoster(delivery.timeoutMs),
        ended: (notification, outcome) =>
          logger.info(
            { taskId: notification.taskId, notificationId: notification.id, outcome },
            'notification delivery',
          ),
        pacing: config.loops.notifications,
        retry,
      })
    : null;
  if (notificationLoop) clock.onJump?.(() => notificationLoop.wake());
  const scheduleLoop = createScheduleLoop({
    ...uses.scheduleFiring,
    logger: logger.child({ loop: 'schedules' }),
    pacing: config.loops.schedules,
    retry,
  });
  const bulkJobLoop = createBulkJobLoop({
    ...uses.bulkJobRunner,
    logger: logger.child({ loop: 'bulkJobs' }),
    pollMs: config.bulkJobPollMs,
    retry,
  });
  // A job whose claim expires at a test clock's jump is taken over at once.
  clock.onJump?.(() => bulkJobLoop.wake());
  signal.loops = {
    bulkJobs: bulkJobLoop,
    outbox: outboxLoop,
    realtime: realtimeLoop,
    scheduler,
    timers: timerLoop,
    callbacks: callbackLoop,
    ...(notificationLoop ? { notifications: notificationLoop } : {}),
    schedules: scheduleLoop,
  };
  const health = createHealthLoop({
    reconciler: new HealthReconciler(uses.status, {
      graceMs: config.healthGraceMs,
      maxPerCycle: config.healthMaxPerCycle,
    }),
    logger: logger.child({ loop: 'health' }),
    clock,
    intervalMs: config.healthCheckIntervalMs,
    retry,
  });
  const chartSampler = createChartSamplerLoop({
    samples: a.chartReads,
    pipeline: { outbox: a.outboxQueue.rows, realtime: realtimeRows, callbacks: callbackQueue.rows },
    steps: a.dashboardReads,
    clock,
    retentionMs: config.chartSampleRetentionMs,
    logger: logger.child({ loop: 'chart-sampler' }),
    intervalMs: config.chartSampleIntervalMs,
    retry,
  });
  const retentionLogger = logger.child({ loop: 'retention' });
  // `TDP_RETENTION_SWEEP=off`: this replica leaves the sweep to the others.
  const retention = config.retention.sweep
    ? [
        createRetentionLoop({
          ...retentionSweepDeps(config, { ...a, logger: retentionLogger }),
          logger: retentionLogger,
          intervalMs: config.retention.sweepIntervalMs,
          retry,
        }),
      ]
    : [];
  const listener = await a.sql.listen(outboxChannel, () => outboxLoop.wake());
  return {
    loops: [
      outboxLoop,
      scheduler,
      leases,
      realtimeLoop,
      timerLoop,
      callbackLoop,
      ...(notificationLoop ? [notificationLoop] : []),
      scheduleLoop,
      health,
      ...retention,
      bulkJobLoop,
      chartSampler,
    ],
    unlisten: listener.unlisten,
  };
}

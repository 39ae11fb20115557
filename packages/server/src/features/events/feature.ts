/**
 * Domain events: the outbox rows facts write, published to NATS JetStream (or to a publisher an embedder
 * gives) by the outbox loop, woken after each commit here and, by a NOTIFY, in the other replicas. With
 * no event bus, facts write no domain outbox rows at all.
 */
import { Type } from 'typebox';
import { InProcessBus } from '../../adapters/outbound/bus/inProcessBus.ts';
import { JetStreamPublisher } from '../../adapters/outbound/nats/jetStreamPublisher.ts';
import { stopListening } from '../../adapters/outbound/postgres/database.ts';
import { PostgresOutboxQueue } from '../../adapters/outbound/postgres/outboxQueue.ts';
import { type DispatchObserver, dispatchOutboxBatch } from '../../core/outbox/dispatchOutbox.ts';
import type { EventPublisher } from '../../core/outbox/ports.ts';
import { defineFeature } from '../../host/feature.ts';
import type { LoopPacing } from '../../host/loops/wakeableLoop.ts';
import { setting, settingsSlice } from '../../host/settings.ts';

/** The PostgreSQL channel outbox loops in every process LISTEN on. */
const outboxChannel = 'tdp_outbox';

export interface Events {
  /** The JetStream connection, when NATS_URL is set. */
  nats: JetStreamPublisher | null;
  natsUrl: string | null;
  /** The JetStream stream of the subject prefix: `TDP_EVENTS` for `tdp`. */
  stream: string;
  subjectPrefix: string;
  outbox: PostgresOutboxQueue;
}

declare module '../../host/provisions.ts' {
  interface Provisions {
    events: Events;
  }
}

const settings = settingsSlice(
  Type.Object({
    natsUrl: setting.optionalString({
      env: 'NATS_URL',
      description: 'NATS with JetStream: domain events are published there (none are written without it).',
    }),
    natsSubjectPrefix: setting.string({
      env: 'TDP_NATS_SUBJECT_PREFIX',
      default: 'tdp',
      description: 'First token of event subjects (`tdp.<tenant>.<application>.events.<type>`).',
    }),
    outboxLoop: setting.value<LoopPacing>({
      // After a burst (10,000 tasks are ~40,000 events) rounds of 100 kept the loop busy well into the
      // traffic that followed; 500 a round cut that tail (`bench -- e2e`: steady p99 193 → 78 ms, 1,000
      // measured the same). Up to 10 ms more commit→publish latency buys batches of many events.
      default: { batchSize: 500, maxIdleMs: 30_000, batchWindowMs: 10 },
      description: "The outbox loop's pacing.",
    }),
  }),
);

export const eventsFeature = defineFeature({
  name: 'events',
  settings,
  async start(host, settings) {
    const { logger, metrics, clock } = host;
    const prefix = settings.natsSubjectPrefix;
    const stream = prefix === 'tdp' ? 'TDP_EVENTS' : `${prefix.toUpperCase()}_EVENTS`;
    const given = host.dependencies.publisher;
    const nats =
      given || !settings.natsUrl
        ? null
        : await JetStreamPublisher.connect({ url: settings.natsUrl, subjectPrefix: prefix, stream });
    // Without a bus nothing reaches the outbox loop; the in-process bus is its idle stand-in.
    const publisher: EventPublisher = given ?? nats ?? new InProcessBus();
    const outbox = new PostgresOutboxQueue(host.sql);
    host.provide('events', { nats, natsUrl: settings.natsUrl, stream, subjectPrefix: prefix, outbox });
    const batchSize = settings.outboxLoop.batchSize;
    const observer: DispatchObserver = {
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
    };
    // Publishes committed domain events, a batch a round.
    const loop = host.settings.runLoops
      ? host.loop({
          name: 'outbox',
          ...settings.outboxLoop,
          round: async (loopLogger) => {
            const report = await dispatchOutboxBatch(
              { queue: outbox, publisher, clock, observer },
              batchSize,
            );
            if (report.failed + report.dead + report.lostClaims > 0)
              loopLogger.warn({ report }, 'outbox round had failures');
            return { full: report.claimed === batchSize };
          },
          nextDueAt: () => outbox.nextDueAt(),
        })
      : null;
    // The NOTIFY is sent outside the writing transaction (one inside every commit would serialise
    // commits), at most every `notifyIntervalMs`.
    let notifyPending = false;
    host.afterCommit.subscribe({
      publishesDomainEvents: Boolean(given || settings.natsUrl),
      committed: (work) => {
        if (!work.outbox) return;
        loop?.wake();
        if (notifyPending) return;
        notifyPending = true;
        setTimeout(() => {
          notifyPending = false;
          host.sql.notify(outboxChannel, '').catch(() => {});
        }, host.settings.notifyIntervalMs).unref();
      },
    });
    // Woken again each time the LISTEN is made again (a lost connection, a failover): what was
    // announced meanwhile was not heard.
    const listener = loop
      ? await host.sql.listen(
          outboxChannel,
          () => loop.wake(),
          () => loop.wake(),
        )
      : null;
    if (loop) host.clock.onJump?.(() => loop.wake());
    return {
      loops: loop ? [loop] : [],
      stop: async () => {
        await stopListening(listener?.unlisten);
        await nats?.close().catch(() => {});
      },
    };
  },
});

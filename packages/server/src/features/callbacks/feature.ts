/** Callbacks: signed deliveries of a task's outcome to its application, retried, then DEAD. */
import { Type } from 'typebox';
import { callbackPoster } from '../../adapters/outbound/http/callbackPoster.ts';
import { PostgresCallbackQueue } from '../../adapters/outbound/postgres/callbackQueue.ts';
import type { ClaimableRows } from '../../adapters/outbound/postgres/outboxQueue.ts';
import { PostgresTraceContexts } from '../../adapters/outbound/postgres/traceContexts.ts';
import { type CallbackSenderDeps, sendDueCallbacks } from '../../core/callbacks/sendCallbacks.ts';
import { defineFeature } from '../../host/feature.ts';
import type { LoopPacing, WakeableLoop } from '../../host/loops/wakeableLoop.ts';
import { setting, settingsSlice } from '../../host/settings.ts';
import { CallbackSigningSecrets } from './signingSecrets.ts';

export interface Callbacks {
  queue: PostgresCallbackQueue;
  /** The secrets that sign an application's deliveries (notifications are signed the same way). */
  signingSecrets: CallbackSigningSecrets;
  /** A loop sending another queue's deliveries as callbacks are sent (the notifications' webhook). */
  deliveryLoop(name: string, pacing: LoopPacing, sender: DeliverySender): WakeableLoop;
}

/** What a delivery loop sends from: a queue of signed deliveries and its claimable rows. */
export type DeliverySender = CallbackSenderDeps & { rows: ClaimableRows };

declare module '../../host/provisions.ts' {
  interface Provisions {
    callbacks: Callbacks;
  }
}

const settings = settingsSlice(
  Type.Object({
    callbackTimeoutMs: setting.integer({
      env: 'TDP_CALLBACK_TIMEOUT_MS',
      default: 10_000,
      description: 'A callback POST unanswered by then fails (and is retried).',
    }),
    callbackSecretsCacheMs: setting.integer({
      env: 'TDP_CALLBACK_SECRETS_CACHE_MS',
      default: 30_000,
      description:
        "How long an application's callback signing secrets are reused before they are read again.",
    }),
    callbacksLoop: setting.value<LoopPacing>({
      default: { batchSize: 50, maxIdleMs: 5_000, batchWindowMs: 10 },
      description: "The callback loop's pacing.",
    }),
  }),
);

export const callbacksFeature = defineFeature({
  name: 'callbacks',
  settings,
  start(host, settings) {
    const { clock, logger } = host;
    const queue = new PostgresCallbackQueue(host.sql);
    const signingSecrets = new CallbackSigningSecrets(
      host.need('identity').store,
      host.secrets,
      clock,
      settings.callbackSecretsCacheMs,
    );
    const deliveryLoop = (name: string, pacing: LoopPacing, sender: DeliverySender) =>
      host.loop({
        name,
        ...pacing,
        round: async (loopLogger) => {
          const report = await sendDueCallbacks(sender, pacing.batchSize);
          if (report.dead > 0) loopLogger.warn({ report }, `${name} went DEAD`);
          return { full: report.claimed === pacing.batchSize };
        },
        nextDueAt: () => sender.rows.nextDueAt(),
      });
    host.provide('callbacks', { queue, signingSecrets, deliveryLoop });
    if (!host.settings.runLoops) return {};
    // With tracing on, a delivery finds its task's trace in its execution snapshot.
    const traces = host.settings.tracing
      ? { traces: { tracing: host.tracing, contexts: new PostgresTraceContexts(host.sql) } }
      : {};
    const loop = deliveryLoop('callbacks', settings.callbacksLoop, {
      queue,
      rows: queue.rows,
      clock,
      signingSecrets: (applicationId) => signingSecrets.of(applicationId),
      post: callbackPoster(settings.callbackTimeoutMs, host.egress),
      ...traces,
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
    });
    host.afterCommit.subscribe({
      committed: (work) => {
        if (work.callbacks) loop.wake();
      },
    });
    host.clock.onJump?.(() => loop.wake());
    return { loops: [loop] };
  },
});

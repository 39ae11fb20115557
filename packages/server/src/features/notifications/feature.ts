/**
 * Notifications: durable per-person records of terminal failures and actions required, read and marked
 * through `/v1/me/notifications`, and POSTed to a webhook when one is configured (signed like callbacks,
 * retried, then DEAD).
 */
import { egressPolicy } from '@tdp/egress/policy';
import { Type } from 'typebox';
import { registerNotificationRoutes } from '../../adapters/inbound/http/notificationRoutes.ts';
import { callbackPoster } from '../../adapters/outbound/http/callbackPoster.ts';
import {
  PostgresNotificationDeliveries,
  PostgresNotificationStore,
} from '../../adapters/outbound/postgres/notificationStore.ts';
import { defineFeature } from '../../host/feature.ts';
import type { LoopPacing } from '../../host/loops/wakeableLoop.ts';
import { ConfigError, setting, settingsSlice } from '../../host/settings.ts';
import {
  defaultNotificationDelivery,
  type NotificationDeliverySettings,
  notificationDeliveryFrom,
  notificationDeliveryVariables,
} from './deliverySettings.ts';

const settings = settingsSlice(
  Type.Object({
    notificationDelivery: setting.custom<NotificationDeliverySettings>({
      variables: notificationDeliveryVariables,
      typeName: 'integer ≥ 0',
      default: defaultNotificationDelivery,
      description: 'The webhook offline notifications are POSTed to, and its retries.',
      parse: (env) =>
        Object.keys(notificationDeliveryVariables).some((name) => env[name]?.trim())
          ? notificationDeliveryFrom(env)
          : undefined,
    }),
    notificationPageLimit: setting.value({
      default: 200,
      description: 'At most this many notifications in one page of `GET /v1/me/notifications`.',
    }),
    notificationsLoop: setting.value<LoopPacing>({
      default: { batchSize: 50, maxIdleMs: 5_000, batchWindowMs: 10 },
      description: "The notification delivery loop's pacing.",
    }),
  }),
  (settings, all) => {
    // The webhook goes through the egress policy like every delivery: one it would refuse is a mistake
    // better told at start than found in a DEAD delivery.
    const { webhookUrl } = settings.notificationDelivery;
    const allow = (all.egressAllow as string[] | undefined) ?? [];
    if (webhookUrl && egressPolicy(allow).refusedLiteral(webhookUrl))
      throw new ConfigError(
        'TDP_NOTIFICATION_WEBHOOK_URL names an address the egress policy refuses; add it to TDP_EGRESS_ALLOW',
      );
  },
);

export const notificationsFeature = defineFeature({
  name: 'notifications',
  settings,
  start(host, settings) {
    const { clock, logger } = host;
    const delivery = settings.notificationDelivery;
    const deliveries =
      host.settings.runLoops && delivery.webhookUrl
        ? new PostgresNotificationDeliveries(host.sql, delivery.webhookUrl, {
            leaseMs: delivery.timeoutMs * 2,
            maxAttempts: delivery.maxAttempts,
            maxBackoffSeconds: delivery.maxBackoffSeconds,
          })
        : null;
    const { signingSecrets, deliveryLoop } = host.need('callbacks');
    const loop = deliveries
      ? deliveryLoop('notifications', settings.notificationsLoop, {
          queue: deliveries,
          rows: deliveries.rows,
          clock,
          signingSecrets: (applicationId) => signingSecrets.of(applicationId),
          post: callbackPoster(delivery.timeoutMs, host.egress),
          ended: (notification, outcome) =>
            logger.info(
              { taskId: notification.taskId, notificationId: notification.id, outcome },
              'notification delivery',
            ),
        })
      : null;
    if (loop) {
      host.afterCommit.subscribe({
        committed: (work) => {
          if (work.notifications) loop.wake();
        },
      });
      host.clock.onJump?.(() => loop.wake());
    }
    return {
      loops: loop ? [loop] : [],
      routes: async (app) => {
        const identity = host.need('identity');
        registerNotificationRoutes(app, {
          inbox: {
            store: new PostgresNotificationStore(host.sql),
            clock,
            applicationsOf: identity.applicationsOf,
          },
          userTokens: identity.userTokens,
          pageLimit: settings.notificationPageLimit,
        });
      },
    };
  },
});

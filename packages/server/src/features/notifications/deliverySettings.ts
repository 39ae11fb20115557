/**
 * The offline notifications' webhook settings (docs/notifications.md), read from `TDP_NOTIFICATION_*`.
 * Apart from config.ts only for its length; it parses with config.ts's own helpers, so its errors read
 * like every other setting's.
 */

/** With a webhook URL, each notification is POSTed there, signed like callbacks, retried, then DEAD. */
export interface NotificationDeliverySettings {
  webhookUrl: string | null;
  maxAttempts: number;
  maxBackoffSeconds: number;
  timeoutMs: number;
}

// A person told of a failure hours late is still told; after a day of retries the receiver is broken.
export const defaultNotificationDelivery: NotificationDeliverySettings = {
  webhookUrl: null,
  maxAttempts: 12,
  maxBackoffSeconds: 3_600,
  timeoutMs: 10_000,
};

export function notificationDeliveryFrom(
  env: NodeJS.ProcessEnv,
  integer: (env: NodeJS.ProcessEnv, name: string, fallback: number) => number,
  problem: (message: string) => Error,
): NotificationDeliverySettings {
  const defaults = defaultNotificationDelivery;
  const webhookUrl = env.TDP_NOTIFICATION_WEBHOOK_URL?.trim() || null;
  if (webhookUrl && !/^https?:\/\/\S+$/.test(webhookUrl))
    throw problem('TDP_NOTIFICATION_WEBHOOK_URL must be an http(s) URL');
  return {
    webhookUrl,
    maxAttempts: integer(env, 'TDP_NOTIFICATION_MAX_ATTEMPTS', defaults.maxAttempts),
    maxBackoffSeconds: integer(env, 'TDP_NOTIFICATION_MAX_BACKOFF_SECONDS', defaults.maxBackoffSeconds),
    timeoutMs: integer(env, 'TDP_NOTIFICATION_TIMEOUT_MS', defaults.timeoutMs),
  };
}

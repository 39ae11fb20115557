/** The offline notifications' webhook settings (docs/notifications.md), read from `TDP_NOTIFICATION_*`. */
import { ConfigError, integerVariable } from '../../host/settings.ts';

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

export const notificationDeliveryVariables = {
  TDP_NOTIFICATION_WEBHOOK_URL: {
    type: 'URL',
    default: '—',
    description:
      'Each notification is POSTed there, signed like callbacks (docs/notifications.md); unset: none is.',
  },
  TDP_NOTIFICATION_MAX_ATTEMPTS: {
    default: `${defaultNotificationDelivery.maxAttempts}`,
    description: 'Attempts at one notification before it is DEAD.',
  },
  TDP_NOTIFICATION_MAX_BACKOFF_SECONDS: {
    default: `${defaultNotificationDelivery.maxBackoffSeconds}`,
    description: 'The longest wait between two attempts.',
  },
  TDP_NOTIFICATION_TIMEOUT_MS: {
    default: `${defaultNotificationDelivery.timeoutMs}`,
    description: 'A POST unanswered by then fails (and is retried).',
  },
};

export function notificationDeliveryFrom(env: NodeJS.ProcessEnv): NotificationDeliverySettings {
  const defaults = defaultNotificationDelivery;
  const webhookUrl = env.TDP_NOTIFICATION_WEBHOOK_URL?.trim() || null;
  if (webhookUrl && !/^https?:\/\/\S+$/.test(webhookUrl))
    throw new ConfigError('TDP_NOTIFICATION_WEBHOOK_URL must be an http(s) URL');
  return {
    webhookUrl,
    maxAttempts: integerVariable(env, 'TDP_NOTIFICATION_MAX_ATTEMPTS', defaults.maxAttempts),
    maxBackoffSeconds: integerVariable(
      env,
      'TDP_NOTIFICATION_MAX_BACKOFF_SECONDS',
      defaults.maxBackoffSeconds,
    ),
    timeoutMs: integerVariable(env, 'TDP_NOTIFICATION_TIMEOUT_MS', defaults.timeoutMs),
  };
}

import { CentrifugoApiPublisher, gatewayPublisher } from '../adapters/outbound/realtime/publishers.ts';
import type { ServerConfig } from '../config.ts';
import type { RealtimeHandoffMode } from '../core/facts/ports.ts';
import type { RealtimePublisher } from '../core/realtime/relay.ts';

/** Where realtime messages go: a Centrifugo-compatible server API when configured, else this gateway. */
export function realtimePublisher(
  config: Pick<ServerConfig, 'centrifugoApiUrl' | 'centrifugoApiKey'>,
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
  config: Pick<ServerConfig, 'redisUrl' | 'centrifugoApiUrl' | 'realtimeHandoffGraceMs'>,
): RealtimeHandoffMode {
  return config.redisUrl || config.centrifugoApiUrl
    ? { kind: 'durable', graceMs: config.realtimeHandoffGraceMs }
    : { kind: 'memoryOnly' };
}

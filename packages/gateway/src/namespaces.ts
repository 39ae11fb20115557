/** Which options a channel has, by its namespace, as Centrifugo resolves them. */
import type { HistoryOptions } from './engine.ts';
import type { ChannelOptions, GatewayOptions } from './options.ts';

/**
 * Without namespaces configured, every channel recovers (TDP's channels) and its subscribers may read its
 * history; nothing else is allowed.
 */
const unconfigured: ChannelOptions = {
  forceRecovery: true,
  allowHistoryForSubscriber: true,
  allowHistoryForAnonymous: true,
};

/** Centrifugo's namespace boundary: `ns:rest` is in namespace `ns`. */
const namespaceBoundary = ':';

/** The channel's options; null when its namespace is not configured (Centrifugo's 102). */
export function channelOptions(
  options: Pick<GatewayOptions, 'channels'>,
  channel: string,
): ChannelOptions | null {
  if (!options.channels) return unconfigured;
  const at = channel.indexOf(namespaceBoundary);
  if (at < 0) return options.channels.withoutNamespace;
  return options.channels.namespaces[channel.slice(0, at)] ?? null;
}

/** History per channel from the namespaces (none where `history_size` or `history_ttl` is 0). */
export const historyFromNamespaces =
  (options: Pick<GatewayOptions, 'channels'>) =>
  (channel: string): HistoryOptions => {
    const found = channelOptions(options, channel);
    const size = found?.historySize ?? 0;
    const ttlMs = found?.historyTtlMs ?? 0;
    return size > 0 && ttlMs > 0 ? { size, ttlMs } : { size: 0, ttlMs: 0 };
  };

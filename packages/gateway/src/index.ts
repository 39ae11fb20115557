export { CentrifugoConfigError, type GatewayConfig, readCentrifugoConfig } from './centrifugoConfig.ts';
export type {
  ControlMessage,
  Engine,
  HistoryOptions,
  HistoryResult,
  Publication,
  StreamPosition,
} from './engine.ts';
export { Gateway, type GatewayOptions, type InternalClient } from './gateway.ts';
export { MemoryEngine } from './memoryEngine.ts';
export type { ChannelNamespaces, ChannelOptions } from './options.ts';
export { RedisEngine, type RedisEngineOptions } from './redisEngine.ts';

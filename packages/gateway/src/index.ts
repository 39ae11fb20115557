export { CentrifugoConfigError, type GatewayConfig, readCentrifugoConfig } from './centrifugoConfig.ts';
export type {
  ControlMessage,
  Engine,
  HistoryOptions,
  HistoryResult,
  Publication,
  PublishOptions,
  StreamPosition,
} from './engine.ts';
export { Gateway, type GatewayOptions, type InternalClient } from './gateway.ts';
export { MemoryEngine } from './memoryEngine.ts';
export type { ChannelNamespaces, ChannelOptions } from './options.ts';
export {
  checkMasterName,
  parseSentinelAddresses,
  type RedisSentinelAddress,
  type RedisSentinelTarget,
  type RedisTarget,
  RedisTargetError,
} from './redisConnection.ts';
export { RedisEngine, type RedisEngineOptions, type RedisEngineSettings } from './redisEngine.ts';

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
export { RedisEngine, type RedisEngineOptions } from './redisEngine.ts';

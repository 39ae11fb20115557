export { Gateway, type GatewayOptions } from './gateway.ts';
export { type HistoryOptions, MemoryEngine, type StreamPosition } from './memoryEngine.ts';

export { RejectedError, UnavailableError, WorkerClient } from './client.ts';
export { type HealthServer, serveHealth } from './health.ts';
export { LocalStore } from './localStore.ts';
export { jsonLogger, type Logger, silentLogger } from './options.ts';
export type { EventsReport, ReportingTransport } from './reporting.ts';
export { backoffMs, type WorkerOptions, WorkerRuntime, type WorkerStatus } from './runtime.ts';
export { type Capability, type CapabilityContext, CapabilityError, defineCapability } from './sdk.ts';
export { type RunningWorker, type StartWorkerOptions, startWorker, WorkerConfigError } from './start.ts';

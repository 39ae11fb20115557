export { archiveClean, cleanArchive } from './capabilities/archiveClean.ts';
export {
  createImageWatermark,
  defaultImageLimits,
  type ImageLimits,
  imageWatermark,
  watermarkArchive,
  watermarkImage,
} from './capabilities/imageWatermark.ts';
export { builtinCapabilities, builtinCapabilityModule } from './capabilities/index.ts';
export { RejectedError, UnavailableError, WorkerClient } from './client.ts';
export {
  GrpcReporting,
  type ReportingTransport,
  ReportStreamClient,
  reportingClient,
} from './grpcReporting.ts';
export { type HealthServer, serveHealth } from './health.ts';
export { LocalStore } from './localStore.ts';
export { jsonLogger, type Logger, silentLogger } from './options.ts';
export { backoffMs, type WorkerOptions, WorkerRuntime, type WorkerStatus } from './runtime.ts';
export { type Capability, type CapabilityContext, CapabilityError, defineCapability } from './sdk.ts';
export { type RunningWorker, type StartWorkerOptions, startWorker, WorkerConfigError } from './start.ts';

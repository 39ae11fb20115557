export { archiveClean, cleanArchive } from './capabilities/archiveClean.ts';
export {
  createImageWatermark,
  defaultImageLimits,
  type ImageLimits,
  imageWatermark,
  watermarkArchive,
  watermarkImage,
} from './capabilities/imageWatermark.ts';
export { builtinCapabilities } from './capabilities/index.ts';
export { RejectedError, UnavailableError, WorkerClient } from './client.ts';
export {
  GrpcReporting,
  type ReportingTransport,
  ReportStreamClient,
  reportingClient,
} from './grpcReporting.ts';
export { LocalStore } from './localStore.ts';
export { backoffMs, type WorkerOptions, WorkerRuntime } from './runtime.ts';
export { type Capability, type CapabilityContext, CapabilityError, defineCapability } from './sdk.ts';

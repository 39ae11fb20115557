/**
 * `@tdp/capabilities`: the capabilities every `tdp worker` offers (`archive.clean`, `image.watermark`),
 * kept out of `@tdp/worker` so that a worker of one's own does not install sharp, a CJK font and the ZIP
 * libraries it never runs.
 */
import type { Capability } from '@tdp/worker';
import { archiveClean } from './archiveClean.ts';
import { imageWatermark } from './imageWatermark.ts';

export { archiveClean, cleanArchive } from './archiveClean.ts';
export {
  createImageWatermark,
  defaultImageLimits,
  type ImageLimits,
  imageWatermark,
  watermarkArchive,
  watermarkImage,
} from './imageWatermark.ts';

/** The capabilities every `tdp worker` offers. */
export const builtinCapabilities: Capability[] = [archiveClean, imageWatermark] as unknown as Capability[];

/** This module, for capability runners to import (`startWorker`'s `capabilityModule`). */
export const builtinCapabilityModule: URL = new URL(import.meta.url);

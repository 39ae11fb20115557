import type { Capability } from '../sdk.ts';
import { archiveClean } from './archiveClean.ts';
import { imageWatermark } from './imageWatermark.ts';

/** The capabilities every `tdp worker` offers. */
export const builtinCapabilities: Capability[] = [archiveClean, imageWatermark] as unknown as Capability[];

/** This module, for capability runners to import (`startWorker`'s `capabilityModule`). */
export const builtinCapabilityModule: URL = new URL(import.meta.url);

import type { Capability } from '../sdk.ts';
import { archiveClean } from './archiveClean.ts';

/** The capabilities every `tdp worker` offers. */
export const builtinCapabilities: Capability[] = [archiveClean as unknown as Capability];

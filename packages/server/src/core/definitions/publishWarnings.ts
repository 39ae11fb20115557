import type { StepDefinition } from '@tdp/protocol';
import { capabilityWarnings, type OfferedCapability, type PublishWarning } from './capabilityWarnings.ts';

/** What the live worker sessions offer now (workers serve the whole platform). */
export interface CapabilityOffers {
  offered(): Promise<OfferedCapability[]>;
}

/** The warnings a publish answers with, from the stored (normalised) steps. */
export async function publishWarnings(
  offers: CapabilityOffers,
  steps: readonly StepDefinition[],
): Promise<PublishWarning[]> {
  return capabilityWarnings(steps, await offers.offered());
}

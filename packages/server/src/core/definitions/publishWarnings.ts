import type { StepDefinition } from '@tdp/protocol';
import { capabilityWarnings, type OfferedCapability, type PublishWarning } from './capabilityWarnings.ts';
import { undeclaredInputMappings } from './mappingGuarantees.ts';

/** What the live worker sessions offer now (workers serve the whole platform). */
export interface CapabilityOffers {
  offered(): Promise<OfferedCapability[]>;
}

/** The warnings a publish answers with, from the stored (normalised) definition. */
export async function publishWarnings(
  offers: CapabilityOffers,
  definition: { steps: StepDefinition[]; inputSchema: Record<string, unknown> },
): Promise<PublishWarning[]> {
  return [
    ...capabilityWarnings(definition.steps, await offers.offered()),
    ...undeclaredInputMappings(definition.steps, definition.inputSchema).map((found) => ({
      code: 'INPUT_NOT_DECLARED' as const,
      ...found,
    })),
  ];
}

/**
 * Publish warnings: steps whose capability and version no registered worker offers. Publishing still
 * succeeds (the worker may simply not be up yet), but a misspelt name would otherwise wait for a worker
 * forever with nothing said, so the publish names each such step and the nearest names that are offered.
 */
import { type StepDefinition, stepKind } from '@tdp/protocol';
import { distance } from 'fastest-levenshtein';

export interface OfferedCapability {
  name: string;
  version: string;
}

export type PublishWarning =
  | {
      code: 'CAPABILITY_NOT_OFFERED';
      stepKey: string;
      capability: string;
      capabilityVersion: string;
      /** The nearest offered `name@version`s, closest first (possibly none). */
      suggestions: string[];
      message: string;
    }
  | {
      /** A required `$.input…` mapping in a workflow without an inputSchema (mappingGuarantees.ts). */
      code: 'INPUT_NOT_DECLARED';
      stepKey: string;
      /** The JSON Pointer of the mapping in the definition. */
      path: string;
      message: string;
    };

export type CapabilityWarning = Extract<PublishWarning, { code: 'CAPABILITY_NOT_OFFERED' }>;

/** Suggestions further than this many edits from what was written are noise, not a likely typo. */
const MAX_DISTANCE = 3;
const MAX_SUGGESTIONS = 3;

export function capabilityWarnings(
  steps: readonly Pick<StepDefinition, 'key' | 'kind' | 'capability' | 'capabilityVersion'>[],
  offered: readonly OfferedCapability[],
): CapabilityWarning[] {
  const offeredIds = [...new Set(offered.map((c) => `${c.name}@${c.version}`))];
  const warnings: CapabilityWarning[] = [];
  for (const step of steps) {
    // Only capability and map steps run on workers; the other kinds run on the platform.
    const kind = stepKind(step);
    if (kind !== 'capability' && kind !== 'map') continue;
    const wanted = `${step.capability}@${step.capabilityVersion}`;
    if (offeredIds.includes(wanted)) continue;
    const suggestions = nearest(wanted, offeredIds);
    const hint = suggestions.length > 0 ? `; did you mean ${suggestions.join(' or ')}?` : '';
    warnings.push({
      code: 'CAPABILITY_NOT_OFFERED',
      stepKey: step.key,
      capability: step.capability,
      capabilityVersion: step.capabilityVersion,
      suggestions,
      message: `step ${step.key}: no registered worker offers ${wanted}${hint}`,
    });
  }
  return warnings;
}

/** The candidates within MAX_DISTANCE edits of `wanted`, closest first, then by name. */
export function nearest(wanted: string, candidates: readonly string[]): string[] {
  return candidates
    .map((candidate) => ({ candidate, distance: distance(wanted, candidate) }))
    .filter((c) => c.distance <= MAX_DISTANCE)
    .sort((a, b) => a.distance - b.distance || a.candidate.localeCompare(b.candidate))
    .slice(0, MAX_SUGGESTIONS)
    .map((c) => c.candidate);
}

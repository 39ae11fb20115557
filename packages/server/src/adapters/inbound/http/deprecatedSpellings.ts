/**
 * Old spellings a client may still send during their deprecation period (docs/architecture.md, "Wire
 * versions and deprecations"). TDP spells cancelled one way, CANCELLED (and CANCELLING); a filter or a
 * correction that still says CANCELED is read as CANCELLED, before validation, so the schema and the
 * OpenAPI document name only the current spelling.
 */
import { renamedStatuses } from '@tdp/protocol';
import type { FastifyRequest } from 'fastify';

/** The status as TDP spells it now (an unknown value is left for validation to refuse). */
export const currentStatusSpelling = (status: string): string => renamedStatuses[status] ?? status;

const statusFields = ['status', 'lifecycleStatus'] as const;

function respell(target: unknown): void {
  if (!target || typeof target !== 'object') return;
  const fields = target as Record<string, unknown>;
  for (const field of statusFields) {
    const value = fields[field];
    if (typeof value === 'string') fields[field] = currentStatusSpelling(value);
  }
}

/** A route's preValidation hook: the query's and body's status fields (and a body's `filter`) respelt. */
export async function readDeprecatedStatusSpellings(request: FastifyRequest): Promise<void> {
  respell(request.query);
  respell(request.body);
  respell((request.body as { filter?: unknown } | undefined)?.filter);
}

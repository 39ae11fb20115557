/**
 * What a producer or coordinator reports, as the status service sees it once an adapter has decoded it:
 * the event (its identity fields only claims until checked), the credential it came with, and what the
 * immutable log keeps of it.
 */
import type { EventResult, Progress, ReportableEventType, StructuredError } from '@tdp/protocol';
import { sanitiseError } from '../facts/stateMachine.ts';
import type { ApplicationPrincipal } from '../identity/ports.ts';
import { fingerprint } from '../shared/canonicalJson.ts';
import type { AppError } from '../shared/errors.ts';
import type { ExecutionClaims } from './ports.ts';

/** An event as decoded from either wire form; identity fields are only claims until checked. */
export interface ReportedEvent {
  eventId: string;
  eventType: ReportableEventType;
  sourceSeq: number;
  businessStatus?: string | undefined;
  phaseCode?: string | undefined;
  phaseLabel?: string | undefined;
  progress?: Progress | undefined;
  message?: string | undefined;
  occurredAt?: string | undefined;
  durationMs?: number | undefined;
  durationSource?: 'MONOTONIC' | 'WALL_CLOCK_ESTIMATE' | undefined;
  data?: { schema: string; value: unknown } | undefined;
  error?: StructuredError | undefined;
  failedStepId?: string | undefined;
  // Restated identity (full form); compared with the credential.
  workflowId?: string | undefined;
  taskId?: string | undefined;
  taskAttempt?: number | undefined;
  stepId?: string | undefined;
  stepAttempt?: number | undefined;
  executionId?: string | undefined;
  operationCode?: string | undefined;
  producerId?: string | undefined;
  taskType?: string | null | undefined;
}

export type EventCredential =
  | { kind: 'token'; token: string }
  /** A platform worker, already checked by the worker gateway (attempt, lease version, worker). */
  | { kind: 'worker'; claims: ExecutionClaims }
  | { kind: 'handle'; handle: string; principal: ApplicationPrincipal }
  | { kind: 'coordinator'; principal: ApplicationPrincipal };

export interface ReportItem {
  credential: EventCredential;
  event: ReportedEvent;
}

export type ReportOutcome = { ok: true; result: EventResult } | { ok: false; error: AppError };

export const platformOutputSchema = 'tdp.output.v1';

/** The hash that tells a retry (same content) from a conflicting reuse of an eventId. */
export function payloadHash(event: ReportedEvent): string {
  return fingerprint(event);
}

export function mismatch(claimed: unknown, actual: unknown): boolean {
  return claimed !== undefined && claimed !== null && claimed !== actual;
}

/** What the immutable log keeps of an event beyond its columns (never the diagnostics reference). */
export function eventPayload(event: ReportedEvent): Record<string, unknown> {
  return {
    ...(event.businessStatus ? { businessStatus: event.businessStatus } : {}),
    ...(event.phaseLabel ? { phaseLabel: event.phaseLabel } : {}),
    ...(event.progress ? { progress: event.progress } : {}),
    ...(event.message ? { message: event.message } : {}),
    ...(event.data ? { data: event.data } : {}),
    ...(event.error ? { error: sanitiseError(event.error, event.error.code) } : {}),
    ...(event.durationSource ? { durationSource: event.durationSource } : {}),
    ...(event.failedStepId ? { failedStepId: event.failedStepId } : {}),
  };
}

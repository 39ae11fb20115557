/** How an attempt ends when its capability does not return a valid output: the STEP_FAILED drafts. */
import type { EventDraft } from './localStore.ts';
import { CapabilityError } from './sdk.ts';

/** Why an attempt's signal was aborted; STOPPED (the runtime stopped) records nothing: a restart resumes. */
export type AbortReason = 'CANCELED' | 'LEASE_LOST' | 'HANDED_BACK' | 'STOPPED';

export function failureDraft(
  code: string,
  message: string,
  retryable: boolean,
  category: string,
): EventDraft {
  return {
    eventType: 'STEP_FAILED',
    error: { category, code, retryable, userMessage: message.slice(0, 2000) },
  };
}

/** The server moved the attempt on: the event is only a record (it will be answered STALE). */
export function leaseLostDraft(): EventDraft {
  return failureDraft('LEASE_LOST', 'the attempt lost its lease', true, 'WORKER');
}

export function canceledDraft(): EventDraft {
  return { eventType: 'STEP_FAILED', error: { category: 'CANCELLED', code: 'CANCELED', retryable: false } };
}

/** A retryable WORKER failure, so the step runs again elsewhere. */
export function handedBackDraft(code = 'WORKER_DRAINING'): EventDraft {
  return failureDraft(code, 'the worker handed the attempt back before finishing it', true, 'WORKER');
}

/** The failure an attempt ends with: why it was aborted, else what its capability threw. */
export function failureOf(error: unknown, signal: AbortSignal): EventDraft {
  const reason = signal.aborted ? (signal.reason as AbortReason) : null;
  if (reason === 'CANCELED') return canceledDraft();
  if (reason === 'LEASE_LOST') return leaseLostDraft();
  if (reason === 'HANDED_BACK') return handedBackDraft();
  if (error instanceof CapabilityError)
    return failureDraft(
      error.code,
      error.message,
      error.options.retryable ?? false,
      error.options.category ?? 'CAPABILITY',
    );
  return failureDraft('CAPABILITY_CRASHED', (error as Error)?.message ?? String(error), true, 'CAPABILITY');
}

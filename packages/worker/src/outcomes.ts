/** How an attempt ends when its capability does not return a valid output: the STEP_FAILED drafts. */
import { clampText, errorDetailMaxLength, messageForPeople } from '@tdp/protocol';
import type { EventDraft } from './localStore.ts';
import { CapabilityError } from './sdk.ts';

/** Why an attempt's signal was aborted; STOPPED (the runtime stopped) records nothing: a restart resumes. */
export type AbortReason = 'CANCELLED' | 'LEASE_LOST' | 'HANDED_BACK' | 'STOPPED';

/**
 * A STEP_FAILED draft. `message` is for people: when it is not fit for them (a JSON body, an internal
 * path, an HTTP answer, a stack) it moves to `detail` and the sentence for `code` is shown instead.
 */
export function failureDraft(
  code: string,
  message: string,
  retryable: boolean,
  category: string,
  technicalDetail?: string,
): EventDraft {
  const shown = messageForPeople(code, message);
  const detail = [shown.detail, technicalDetail].filter((d): d is string => !!d).join(' — ');
  return {
    eventType: 'STEP_FAILED',
    error: {
      category,
      code,
      retryable,
      userMessage: shown.userMessage,
      ...(detail ? { detail: clampText(detail, errorDetailMaxLength) } : {}),
    },
  };
}

/** The server moved the attempt on: the event is only a record (it will be answered STALE). */
export function leaseLostDraft(): EventDraft {
  return failureDraft('LEASE_LOST', 'the attempt lost its lease', true, 'WORKER');
}

export function canceledDraft(): EventDraft {
  return { eventType: 'STEP_FAILED', error: { category: 'CANCELLED', code: 'CANCELLED', retryable: false } };
}

/** A retryable WORKER failure, so the step runs again elsewhere. */
export function handedBackDraft(code = 'WORKER_DRAINING'): EventDraft {
  return failureDraft(code, 'the worker handed the attempt back before finishing it', true, 'WORKER');
}

/** The failure an attempt ends with: why it was aborted, else what its capability threw. */
export function failureOf(error: unknown, signal: AbortSignal): EventDraft {
  const reason = signal.aborted ? (signal.reason as AbortReason) : null;
  if (reason === 'CANCELLED') return canceledDraft();
  if (reason === 'LEASE_LOST') return leaseLostDraft();
  if (reason === 'HANDED_BACK') return handedBackDraft();
  if (error instanceof CapabilityError)
    return failureDraft(
      error.code,
      error.message,
      error.options.retryable ?? false,
      error.options.category ?? 'CAPABILITY',
      error.options.detail,
    );
  // An unexpected error's text is for developers only (it may name files, hosts or internals).
  const text = (error as Error)?.message ?? String(error);
  return failureDraft('CAPABILITY_CRASHED', '', true, 'CAPABILITY', text);
}

/**
 * The attempt inbox: a worker's events, each checked against the worker and its lease — the attempt must
 * be leased to this worker, at the current lease version — and then recorded through the status service
 * like any other fact. Command acknowledgements sent with them are written in the same commit.
 */
import type { ErrorCode, EventResult, WorkerEvent } from '@tdp/protocol';
import type { WorkerOwner } from '../workers/ports.ts';
import type { StatusDeps } from './deps.ts';
import { reportTaskEvents } from './events.ts';
import { claimsOfAttempt } from './executionClaims.ts';
import { type ItemEvent, recordMapItemEvents } from './mapItemEvents.ts';
import { platformOutputSchema } from './reportedEvents.ts';

/** Refused by the inbox itself (the attempt's owner or lease), or by the status service after it. */
export type WorkerEventOutcome =
  | { ok: true; result: EventResult }
  | { ok: false; code: ErrorCode; refusedBy: 'inbox' | 'status'; detail: string };

/** The attempt inbox: each item checked against the worker and its lease, then the status service. */
export async function recordWorkerEvents(
  deps: StatusDeps,
  worker: WorkerOwner,
  items: WorkerEvent[],
  /** Commands the worker acknowledges with these events: one request and one commit for both. */
  commandAcks: string[] = [],
): Promise<WorkerEventOutcome[]> {
  const attempts = new Map(
    (await deps.store.attemptsById([...new Set(items.map((i) => i.attemptId))])).map((a) => [a.id, a]),
  );
  const outcomes: (WorkerEventOutcome | null)[] = items.map((item) => {
    const attempt = attempts.get(item.attemptId);
    if (!attempt || attempt.workerId !== worker.id)
      return {
        ok: false,
        code: 'STEP_NOT_REGISTERED',
        refusedBy: 'inbox',
        detail: `attempt ${item.attemptId} is not leased to this worker`,
      };
    if (attempt.leaseVersion !== item.leaseVersion)
      return {
        ok: false,
        code: 'STALE_EXECUTION',
        refusedBy: 'inbox',
        detail: `lease version ${item.leaseVersion} is not current (${attempt.leaseVersion})`,
      };
    return null;
  });
  // Events of map items take their own path (mapItemEvents.ts): an item is not a step.
  const itemEvents: { item: (typeof items)[number]; index: number; attempt: ItemEvent['attempt'] }[] = [];
  const accepted: { item: (typeof items)[number]; index: number }[] = [];
  items.forEach((item, index) => {
    if (outcomes[index] !== null) return;
    const attempt = attempts.get(item.attemptId)!;
    if (attempt.itemIndex !== null)
      itemEvents.push({ item, index, attempt: attempt as ItemEvent['attempt'] });
    else accepted.push({ item, index });
  });
  const acks =
    commandAcks.length > 0
      ? { workerId: worker.id, commandIds: commandAcks, at: deps.clock.now() }
      : undefined;
  if (itemEvents.length > 0) {
    const itemOutcomes = await recordMapItemEvents(
      deps,
      itemEvents.map(({ item, attempt }) => ({ item, attempt })),
      accepted.length === 0 ? acks : undefined,
    );
    itemEvents.forEach(({ index }, i) => {
      outcomes[index] = itemOutcomes[i]!;
    });
    if (accepted.length === 0) return outcomes as WorkerEventOutcome[];
  }
  if (accepted.length === 0) {
    // Acknowledgements alone: one statement, no transaction around it.
    if (acks)
      await deps.store.transaction(
        async (tx) => tx.writeAtCommit([{ commandAcks: acks, events: [], outbox: [], realtime: [] }]),
        { writeOnly: true },
      );
    return outcomes as WorkerEventOutcome[];
  }
  const results = await reportTaskEvents(
    deps,
    accepted.map(({ item }) => {
      const attempt = attempts.get(item.attemptId)!;
      return {
        credential: {
          kind: 'worker' as const,
          claims: claimsOfAttempt(attempt, ''),
        },
        event: {
          eventId: item.eventId,
          eventType: item.eventType,
          sourceSeq: item.sourceSeq,
          progress: item.progress,
          phaseCode: item.phaseCode,
          phaseLabel: item.phaseLabel,
          message: item.message,
          durationMs: item.durationMs,
          occurredAt: item.occurredAt,
          error: item.error,
          ...(item.eventType === 'STEP_COMPLETED' && item.output !== undefined
            ? { data: { schema: platformOutputSchema, value: item.output } }
            : {}),
        },
      };
    }),
    { attempts: [...attempts.values()], ...(acks ? { commandAcks: acks } : {}) },
  );
  accepted.forEach(({ index }, i) => {
    const outcome = results[i]!;
    outcomes[index] = outcome.ok
      ? { ok: true, result: outcome.result }
      : { ok: false, code: outcome.error.code, refusedBy: 'status', detail: outcome.error.message };
  });
  return outcomes as WorkerEventOutcome[];
}

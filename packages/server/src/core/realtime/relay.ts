/**
 * The realtime relay: claims committed `realtime_outbox` rows (one per commit,
 * holding its messages) with the shared claim mechanism and publishes their messages, in commit order,
 * through a port (the in-process gateway, or a Centrifugo-compatible HTTP API). A message that failed
 * for now (timeout, 429, 5xx) is retried with its row, with spread-out back-off; one the API refused goes
 * DEAD at once, in a row of its own. Messages that went are not sent again. Within a round, a
 * progress-only message superseded by a newer one of the same task on the same channel is not sent:
 * the newer carries everything it said. Terminal, failure and action-required messages always go.
 */
import type { Clock, TraceContexts, Tracing } from '../shared/ports.ts';

export interface RealtimeMessage {
  channel: string;
  data: unknown;
  /**
   * The message's id, sent as its idempotency key: the realtime server publishes it once however often
   * it is sent (the hand-off and the relay, a retry after a node died having published it).
   */
  id?: string;
}

/** Per message, in order: sent, worth retrying, or refused for good. */
export type PublishOutcome = { ok: true } | { ok: false; permanent: boolean; error: string };

/** Where projections go: the in-process gateway, or a Centrifugo-compatible HTTP API. */
export interface RealtimePublisher {
  publish(messages: RealtimeMessage[]): Promise<PublishOutcome[]>;
}

/** A message as the realtime outbox stores it (the JSON of its row's `messages`, migration 030). */
export interface StoredRealtimeMessage {
  id: string;
  tenant_id: string | null;
  aggregate_type: string;
  aggregate_id: string;
  aggregate_version: string;
  channel: string;
  projection: string;
  payload: unknown;
}

/** A claimed row: one commit's messages, in order. */
export interface RealtimeOutboxRow {
  id: string;
  claim_id: string;
  attempts: number;
  messages: StoredRealtimeMessage[];
  created_at: Date;
}

/** A row's messages after a round that did not send all of them. */
export interface RealtimeSettlement {
  sent: StoredRealtimeMessage[];
  retry: StoredRealtimeMessage[];
  refused: StoredRealtimeMessage[];
}

export interface RealtimeRows {
  claimRows(now: Date, limit: number): Promise<RealtimeOutboxRow[]>;
  markPublished(claimId: string, ids: string[], now: Date): Promise<string[]>;
  settle(
    claimId: string,
    row: RealtimeOutboxRow,
    messages: RealtimeSettlement,
    error: string,
    now: Date,
  ): Promise<'FAILED' | 'DEAD' | 'PUBLISHED' | null>;
}

export interface RelayObserver {
  /** Commit → publish latency of each message sent (from its fact's time). */
  published?(committedAt: Date, now: Date): void;
  /** For a message the hand-off sent: the time from its transaction's end (the hand-off) to then. */
  handedOff?(takenAt: Date, now: Date): void;
  /** Superseded progress messages that were not sent. */
  coalesced?(count: number): void;
  dead?(message: { id: string; channel: string }, error: string): void;
}

export interface RelayDeps {
  rows: RealtimeRows;
  publisher: RealtimePublisher;
  clock: Clock;
  observer?: RelayObserver;
  /** With tracing on: each published task message is a span in its task's trace. */
  traces?: { tracing: Tracing; contexts: TraceContexts };
}

type Payload = Record<string, unknown> & {
  kind?: string;
  notice?: unknown;
  lifecycleStatus?: string;
  businessStatus?: string;
  health?: string;
  state?: { lifecycleStatus?: string; businessStatus?: string; health?: string };
  triggerEvent?: { eventType?: string };
};

/** What must reach people even when a newer message follows: any change of status, health or notice. */
function statusOf(payload: Payload): string | null {
  if (payload.kind === 'task.summary')
    return `${payload.lifecycleStatus}|${payload.businessStatus}|${payload.health}`;
  if (payload.kind === 'task.detail' && payload.state)
    return `${payload.state.lifecycleStatus}|${payload.state.businessStatus}|${payload.state.health}`;
  return null;
}

/**
 * The rows of a round that need not be sent: a task message without a notice that only moved progress
 * (a detail triggered by a progress event; a summary whose status equals the previous one of that task
 * on that channel in the round), when a newer message of the same task on the same channel follows.
 */
export function supersededProgress(
  rows: { id: string; channel: string; aggregateId: string; payload: unknown }[],
): Set<string> {
  const skipped = new Set<string>();
  const keyOf = (row: { channel: string; aggregateId: string }) => `${row.channel}\n${row.aggregateId}`;
  const remaining = new Map<string, number>();
  for (const row of rows) remaining.set(keyOf(row), (remaining.get(keyOf(row)) ?? 0) + 1);
  const previous = new Map<string, string | null>();
  for (const row of rows) {
    const key = keyOf(row);
    const left = remaining.get(key)! - 1;
    remaining.set(key, left);
    const payload = row.payload as Payload;
    const status = statusOf(payload);
    const progressOnly =
      status !== null &&
      payload.notice == null &&
      (payload.kind === 'task.detail'
        ? payload.triggerEvent?.eventType === 'STEP_PROGRESS'
        : previous.get(key) === status);
    if (left > 0 && progressOnly) skipped.add(row.id);
    previous.set(key, status);
  }
  return skipped;
}

/** At most this many messages in one publish call (one HTTP request to a Centrifugo API). */
const messagesPerPublish = 1_000;

/** One round; returns how many rows it claimed. */
export async function relayRealtime(deps: RelayDeps, limit: number): Promise<number> {
  const rows = await deps.rows.claimRows(deps.clock.now(), limit);
  if (rows.length === 0) return 0;
  const claimId = rows[0]!.claim_id;
  const messages = rows.flatMap((row) => row.messages.map((message) => ({ row, message })));
  const skipped = supersededProgress(
    messages.map(({ message }) => ({ ...message, aggregateId: message.aggregate_id })),
  );
  const sending = messages.filter(({ message }) => !skipped.has(message.id));
  const startedAt = deps.clock.now();
  const outcomes: PublishOutcome[] = [];
  // A row holds a whole commit: a round of rows after an outage can hold many thousands of messages.
  for (let start = 0; start < sending.length; start += messagesPerPublish) {
    const part = sending.slice(start, start + messagesPerPublish);
    try {
      const answered = await deps.publisher.publish(
        part.map(({ message }) => ({ id: message.id, channel: message.channel, data: message.payload })),
      );
      for (const index of part.keys())
        outcomes.push(
          answered[index] ?? { ok: false, permanent: false, error: 'no outcome for the message' },
        );
    } catch (error) {
      const message = (error as Error).message;
      outcomes.push(...part.map(() => ({ ok: false as const, permanent: false, error: message })));
    }
  }
  const now = deps.clock.now();
  const settlements = new Map<RealtimeOutboxRow, RealtimeSettlement & { error: string | null }>();
  for (const row of rows) settlements.set(row, { sent: [], retry: [], refused: [], error: null });
  for (const { row, message } of messages)
    if (skipped.has(message.id)) settlements.get(row)!.sent.push(message);
  const published: { row: RealtimeOutboxRow; message: StoredRealtimeMessage }[] = [];
  for (const [index, { row, message }] of sending.entries()) {
    const outcome = outcomes[index]!;
    const settlement = settlements.get(row)!;
    if (outcome.ok) {
      settlement.sent.push(message);
      published.push({ row, message });
      continue;
    }
    (outcome.permanent ? settlement.refused : settlement.retry).push(message);
    settlement.error ??= outcome.error.slice(0, 1000);
  }
  const done: string[] = [];
  for (const [row, settlement] of settlements) {
    if (settlement.error === null) {
      done.push(row.id);
      continue;
    }
    const became = await deps.rows.settle(claimId, row, settlement, settlement.error, now);
    if (became === null) continue;
    const gaveUp = became === 'DEAD' ? [...settlement.retry, ...settlement.refused] : settlement.refused;
    for (const message of gaveUp) deps.observer?.dead?.(message, settlement.error);
  }
  for (const { row } of published) deps.observer?.published?.(row.created_at, now);
  if (deps.traces) await traceRelayed(deps.traces, published, startedAt, now);
  if (skipped.size > 0) deps.observer?.coalesced?.(skipped.size);
  if (done.length > 0) await deps.rows.markPublished(claimId, done, now);
  return rows.length;
}

async function traceRelayed(
  traces: NonNullable<RelayDeps['traces']>,
  published: { message: StoredRealtimeMessage }[],
  startedAt: Date,
  endedAt: Date,
): Promise<void> {
  const parents = await traces.contexts.ofTasks([
    ...new Set(published.map(({ message }) => message.aggregate_id)),
  ]);
  for (const { message } of published) {
    const parent = parents.get(message.aggregate_id);
    if (!parent) continue;
    traces.tracing.recordSpan('tdp.realtime.publish', {
      parent,
      kind: 'client',
      startedAt,
      endedAt,
      attributes: { taskId: message.aggregate_id, outboxId: message.id, channel: message.channel },
    });
  }
}

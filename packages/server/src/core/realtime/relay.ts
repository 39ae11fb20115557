/**
 * The realtime relay (source document 002 §6): claims committed `realtime_outbox` rows with the shared
 * claim mechanism and publishes them, in commit order, through a port (the in-process gateway, or a
 * Centrifugo-compatible HTTP API). A transient failure (timeout, 429, 5xx) is retried with spread-out
 * back-off; a permanent one (the API refused the message) goes DEAD at once. Within a round, a
 * progress-only message superseded by a newer one of the same task on the same channel is not sent:
 * the newer carries everything it said. Terminal, failure and action-required messages always go.
 */
import type { Clock, TraceContexts, Tracing } from '../shared/ports.ts';

export interface RealtimeMessage {
  channel: string;
  data: unknown;
}

/** Per message, in order: sent, worth retrying, or refused for good. */
export type PublishOutcome = { ok: true } | { ok: false; permanent: boolean; error: string };

/** Where projections go: the in-process gateway, or a Centrifugo-compatible HTTP API. */
export interface RealtimePublisher {
  publish(messages: RealtimeMessage[]): Promise<PublishOutcome[]>;
}

export interface RealtimeRow {
  id: string;
  claim_id: string;
  attempts: number;
  channel: string;
  aggregate_id: string;
  payload: unknown;
  created_at: Date;
}

export interface RealtimeRows {
  claim<Row extends object>(
    now: Date,
    limit: number,
  ): Promise<(Row & { id: string; claim_id: string; attempts: number })[]>;
  markPublished(claimId: string, ids: string[], now: Date): Promise<string[]>;
  markFailed(
    claimId: string,
    id: string,
    attempts: number,
    error: string,
    now: Date,
  ): Promise<'FAILED' | 'DEAD' | null>;
  markDead(claimId: string, id: string, error: string): Promise<boolean>;
}

export interface RelayObserver {
  /** Commit → publish latency of each message sent. */
  published?(committedAt: Date, now: Date): void;
  /** Superseded progress messages that were not sent. */
  coalesced?(count: number): void;
  dead?(row: RealtimeRow, error: string): void;
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

/** One round; returns how many rows it claimed. */
export async function relayRealtime(deps: RelayDeps, limit: number): Promise<number> {
  const rows = await deps.rows.claim<RealtimeRow>(deps.clock.now(), limit);
  if (rows.length === 0) return 0;
  const claimId = rows[0]!.claim_id;
  const skipped = supersededProgress(rows.map((row) => ({ ...row, aggregateId: row.aggregate_id })));
  const sending = rows.filter((row) => !skipped.has(row.id));
  let outcomes: PublishOutcome[];
  const startedAt = deps.clock.now();
  try {
    outcomes = await deps.publisher.publish(
      sending.map((row) => ({ channel: row.channel, data: row.payload })),
    );
  } catch (error) {
    const message = (error as Error).message;
    outcomes = sending.map(() => ({ ok: false, permanent: false, error: message }));
  }
  const done = [...skipped];
  const now = deps.clock.now();
  for (const [index, row] of sending.entries()) {
    const outcome = outcomes[index] ?? { ok: false, permanent: false, error: 'no outcome for the message' };
    if (outcome.ok) {
      done.push(row.id);
      deps.observer?.published?.(row.created_at, now);
    } else if (outcome.permanent) {
      if (await deps.rows.markDead(claimId, row.id, outcome.error)) deps.observer?.dead?.(row, outcome.error);
    } else if (
      (await deps.rows.markFailed(claimId, row.id, row.attempts, outcome.error.slice(0, 1000), now)) ===
      'DEAD'
    ) {
      deps.observer?.dead?.(row, outcome.error);
    }
  }
  if (deps.traces) await traceRelayed(deps.traces, sending, done, startedAt, now);
  if (skipped.size > 0) deps.observer?.coalesced?.(skipped.size);
  if (done.length > 0) await deps.rows.markPublished(claimId, done, now);
  return rows.length;
}

async function traceRelayed(
  traces: NonNullable<RelayDeps['traces']>,
  sending: RealtimeRow[],
  done: string[],
  startedAt: Date,
  endedAt: Date,
): Promise<void> {
  const published = sending.filter((row) => done.includes(row.id));
  const parents = await traces.contexts.ofTasks([...new Set(published.map((row) => row.aggregate_id))]);
  for (const row of published) {
    const parent = parents.get(row.aggregate_id);
    if (!parent) continue;
    traces.tracing.recordSpan('tdp.realtime.publish', {
      parent,
      kind: 'client',
      startedAt,
      endedAt,
      attributes: { taskId: row.aggregate_id, outboxId: row.id, channel: row.channel },
    });
  }
}

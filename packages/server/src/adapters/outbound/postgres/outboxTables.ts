/**
 * The outbox tables a fact fills for after its commit: the domain outbox (outbox_event), the realtime
 * outbox (realtime_outbox) and the callback deliveries (callback_delivery).
 */
import type { MergedWrites } from './mergeWrites.ts';
import { realtimeOutboxInsert } from './realtimeOutbox.ts';
import { type Column, insertStatement, type RowStatement, type RowValue } from './recordset.ts';

const outboxColumns: Column[] = [
  ['id', 'uuid'],
  ['tenant_id', 'uuid'],
  ['application_id', 'uuid'],
  ['aggregate_id', 'uuid'],
  ['event_type', 'text'],
  ['payload', 'jsonb'],
  ['available_at', 'timestamptz'],
  ['created_at', 'timestamptz'],
];

const callbackColumns: Column[] = [
  ['id', 'uuid'],
  ['application_id', 'uuid'],
  ['task_id', 'uuid'],
  ['execution_id', 'uuid'],
  ['sequence', 'integer'],
  ['event_id', 'uuid'],
  ['event_type', 'text'],
  ['url', 'text'],
  ['payload', 'jsonb'],
  ['available_at', 'timestamptz'],
  ['created_at', 'timestamptz'],
];

/** The domain outbox rows, then the realtime ones. */
export function pushOutboxStatements(w: MergedWrites, statements: RowStatement[]): void {
  if (w.outbox.length > 0) {
    statements.push(
      insertStatement(
        'outbox_event',
        outboxColumns,
        w.outbox.map((o) => ({
          id: o.id,
          tenant_id: o.tenantId,
          application_id: o.applicationId,
          aggregate_id: o.aggregateId,
          event_type: o.eventType,
          payload: o.payload as RowValue,
          available_at: o.createdAt,
          created_at: o.createdAt,
        })),
      ),
    );
  }
  if (w.realtime.length > 0) statements.push(realtimeOutboxInsert(w.realtime));
}

export function pushCallbackStatements(w: MergedWrites, statements: RowStatement[]): void {
  if (w.callbacks.length > 0) {
    statements.push(
      insertStatement(
        'callback_delivery',
        callbackColumns,
        w.callbacks.map((c) => ({
          id: c.id,
          application_id: c.applicationId,
          task_id: c.taskId,
          execution_id: c.executionId,
          sequence: c.sequence,
          event_id: c.eventId,
          event_type: c.eventType,
          url: c.url,
          payload: c.payload,
          available_at: c.createdAt,
          created_at: c.createdAt,
        })),
      ),
    );
  }
}

/**
 * What the scheduler and the timers work off: scheduling requests (one per step waiting for a worker),
 * timers, and the task's timeline of milestones (columns, statements and the scheduler's reads).
 */
import type { DeferredRequest } from '../../../core/facts/ports.ts';
import type { TxSql } from './database.ts';
import type { MergedWrites } from './mergeWrites.ts';
import { type Column, insertStatement, type RowStatement, updateRows } from './recordset.ts';

const schedulingRequestColumns: Column[] = [
  ['id', 'uuid'],
  ['task_id', 'uuid'],
  ['step_id', 'uuid'],
  ['tenant_id', 'uuid'],
  ['application_id', 'uuid'],
  ['fairness_key', 'text'],
  ['fairness_weight', 'double precision'],
  ['priority', 'integer'],
  ['status', 'text'],
  ['available_at', 'timestamptz'],
  ['created_at', 'timestamptz'],
  ['updated_at', 'timestamptz'],
];

const schedulingRequestDeferColumns: Column[] = [
  ['id', 'uuid'],
  ['reasons', 'jsonb'],
  ['available_at', 'timestamptz'],
  ['updated_at', 'timestamptz'],
  ['parked_key', 'text'],
  ['parked_value', 'text'],
  ['parked_limit', 'integer'],
];

const timerColumns: Column[] = [
  ['id', 'uuid'],
  ['kind', 'text'],
  ['task_id', 'uuid'],
  ['step_id', 'uuid'],
  ['payload', 'jsonb'],
  ['available_at', 'timestamptz'],
  ['created_at', 'timestamptz'],
];

const timelineColumns: Column[] = [
  ['id', 'uuid'],
  ['task_id', 'uuid'],
  ['execution_id', 'uuid'],
  ['kind', 'text'],
  ['message', 'text'],
  ['data', 'jsonb'],
  ['at', 'timestamptz'],
];

/** New scheduling requests, then the closing of open ones. */
export function pushSchedulingRequestStatements(w: MergedWrites, statements: RowStatement[]): void {
  // A request closed by the batch that opened it is written closed; the others are closed by step.
  // A step closed twice keeps its first status, as two UPDATEs in a row would.
  const closing = new Map<string, string>();
  for (const [status, stepIds] of w.closeSchedulingRequests)
    for (const stepId of stepIds) if (!closing.has(stepId)) closing.set(stepId, status);
  if (w.schedulingRequests.length > 0) {
    statements.push(
      insertStatement(
        'scheduling_request',
        schedulingRequestColumns,
        w.schedulingRequests.map((r) => {
          const status = closing.get(r.stepId) ?? 'PENDING';
          closing.delete(r.stepId);
          return {
            id: r.id,
            task_id: r.taskId,
            step_id: r.stepId,
            tenant_id: r.tenantId,
            application_id: r.applicationId,
            fairness_key: r.fairnessKey,
            fairness_weight: r.fairnessWeight,
            priority: r.priority,
            status,
            available_at: r.availableAt,
            created_at: r.createdAt,
            updated_at: r.createdAt,
          };
        }),
        'ON CONFLICT (step_id) DO NOTHING',
      ),
    );
  }
  if (closing.size > 0) {
    statements.push({
      text: closeRequests,
      rows: JSON.stringify([...closing].map(([step_id, status]) => ({ step_id, status }))),
    });
  }
}

/**
 * The open requests of these steps that no other transaction holds. A scheduler round holds the
 * requests it claimed while it waits for their tasks' locks; a fact holding one of those task locks and
 * waiting here for the request would deadlock with it (PostgreSQL breaks that after a second). Skipping
 * is safe: the round then finds the step moved on (closed, ended: "stale") once it has the task lock,
 * and closes the request itself — or, for a map made due again, places with what the fact committed.
 */
const unheldRequests = `scheduling_request.id IN (
    SELECT r.id FROM scheduling_request r
    WHERE r.step_id = ANY(ARRAY(SELECT y.step_id FROM jsonb_to_recordset($1::text::jsonb) AS y(step_id uuid)))
    FOR UPDATE SKIP LOCKED)`;

const closeRequests = `UPDATE scheduling_request SET status = x.status, updated_at = now()
  FROM jsonb_to_recordset($1::text::jsonb) AS x(step_id uuid, status text)
  WHERE scheduling_request.step_id = x.step_id AND scheduling_request.status = 'PENDING' AND ${unheldRequests}`;

/**
 * A map's request made due again: at once, or sooner if it was due later (a back-off, a deferral). A
 * closed one arrives anew, to be tagged again (each round of items is charged its place in line); an
 * open one keeps its place. A parked one is tried again: the slot its item gave back may be the one its
 * concurrency key waits for (placement parks it again if not). Its reasons stay until a round finds
 * others, so a map whose items wait on a key says so on its timeline once, not at every item's end.
 */
const reopenRequests = `UPDATE scheduling_request SET status = 'PENDING', updated_at = x.at,
    parked_key = NULL, parked_value = NULL, parked_limit = NULL,
    tenant_tag = CASE WHEN scheduling_request.status = 'PENDING' THEN tenant_tag END,
    application_tag = CASE WHEN scheduling_request.status = 'PENDING' THEN application_tag END,
    order_at = CASE WHEN scheduling_request.status = 'PENDING' THEN order_at END,
    created_at = CASE WHEN scheduling_request.status = 'PENDING' THEN created_at ELSE x.at END,
    available_at = CASE WHEN scheduling_request.status = 'PENDING'
                        THEN least(scheduling_request.available_at, x.available_at)
                        ELSE x.available_at END
  FROM jsonb_to_recordset($1::text::jsonb) AS x(step_id uuid, available_at timestamptz, at timestamptz)
  WHERE scheduling_request.step_id = x.step_id AND ${unheldRequests}`;

/**
 * Map steps' requests made due again (each map has one for its whole life, written when it begins),
 * unless a scheduler round holds one: that round places with the state this fact commits.
 */
export function pushReopenedRequestStatements(w: MergedWrites, statements: RowStatement[]): void {
  if (w.reopenSchedulingRequests.length === 0) return;
  statements.push({
    text: reopenRequests,
    rows: JSON.stringify(
      w.reopenSchedulingRequests.map((r) => ({
        step_id: r.stepId,
        available_at: r.availableAt,
        at: r.createdAt,
      })),
    ),
  });
}

export function pushTimerStatements(w: MergedWrites, statements: RowStatement[]): void {
  if (w.timers.length > 0) {
    statements.push(
      insertStatement(
        '"timer"',
        timerColumns,
        w.timers.map((t) => ({
          id: t.id,
          kind: t.kind,
          task_id: t.taskId,
          step_id: t.stepId,
          payload: t.payload,
          available_at: t.availableAt,
          created_at: t.createdAt,
        })),
      ),
    );
  }
}

export function pushTimelineStatements(w: MergedWrites, statements: RowStatement[]): void {
  if (w.timeline.length > 0) {
    statements.push(
      insertStatement(
        'timeline',
        timelineColumns,
        w.timeline.map((m) => ({
          id: m.id,
          task_id: m.taskId,
          execution_id: m.executionId,
          kind: m.kind,
          message: m.message,
          data: m.data,
          at: m.at,
        })),
      ),
    );
  }
}

/** Claimed requests put back; one held by a concurrency key is parked on its pool until a slot frees. */
export async function deferSchedulingRequests(sql: TxSql, requests: DeferredRequest[], availableAt: Date) {
  await updateRows(
    sql,
    'scheduling_request',
    schedulingRequestDeferColumns,
    requests.map((r) => ({
      id: r.id,
      reasons: r.reasons,
      available_at: r.availableAt ?? availableAt,
      updated_at: availableAt,
      parked_key: r.parkedOn?.name ?? null,
      parked_value: r.parkedOn?.value ?? null,
      parked_limit: r.parkedOn?.limit ?? null,
    })),
  );
}

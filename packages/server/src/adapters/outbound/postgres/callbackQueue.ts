import type { CallbackQueue, ClaimedCallback } from '../../../core/callbacks/sendCallbacks.ts';
import type { CallbackDeliveryRow } from '../../../core/operations/ports.ts';
import { afterFailure } from '../../../core/outbox/policy.ts';
import type { Sql } from './database.ts';
import { ClaimableRows } from './outboxQueue.ts';

export class PostgresCallbackQueue implements CallbackQueue {
  readonly rows: ClaimableRows;

  constructor(private readonly sql: Sql) {
    this.rows = new ClaimableRows(sql, 'callback_delivery');
  }

  async claim(now: Date, limit: number): Promise<ClaimedCallback[]> {
    const rows = await this.rows.claim<{
      application_id: string;
      task_id: string;
      execution_id: string;
      url: string;
      payload: Record<string, unknown>;
    }>(now, limit, { group: 'execution_id', order: 'sequence' });
    return rows.map((r) => ({
      id: r.id,
      claimId: r.claim_id,
      attempts: r.attempts,
      applicationId: r.application_id,
      taskId: r.task_id,
      executionId: r.execution_id,
      url: r.url,
      payload: r.payload,
    }));
  }

  async delivered(claimId: string, id: string, status: number, now: Date) {
    await this.rows.markPublished(claimId, [id], now);
    await this.sql`UPDATE callback_delivery SET response_status = ${status} WHERE id = ${id}`;
  }

  async failed(claimId: string, id: string, attempts: number, error: string, now: Date, jitterMs: number) {
    const outcome = afterFailure(attempts, now);
    if (outcome.status === 'DEAD') {
      await this.rows.markDead(claimId, id, error);
      return;
    }
    await this.sql`
      UPDATE callback_delivery SET status = 'FAILED', available_at = ${new Date(outcome.availableAt.getTime() + jitterMs)}, last_error = ${error},
             claim_id = NULL, claim_expires_at = NULL
      WHERE id = ${id} AND claim_id = ${claimId} AND status = 'PUBLISHING'`;
  }

  async dead(claimId: string, id: string, error: string) {
    await this.rows.markDead(claimId, id, error);
  }

  async redeliver(applicationId: string, id: string, now: Date): Promise<boolean> {
    const rows = await this.sql`
      UPDATE callback_delivery SET status = 'PENDING', attempts = 0, available_at = ${now}, last_error = NULL, claim_id = NULL,
             claim_expires_at = NULL
      WHERE id = ${id} AND application_id = ${applicationId} AND status <> 'PUBLISHING' RETURNING id`;
    return rows.length > 0;
  }

  async forTask(taskId: string) {
    return this.sql<
      CallbackDeliveryRow[]
    >`SELECT id, sequence, event_type, status, attempts, response_status, last_error, created_at, published_at
      FROM callback_delivery WHERE task_id = ${taskId} ORDER BY execution_id, sequence`;
  }
}

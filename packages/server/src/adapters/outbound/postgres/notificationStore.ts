/**
 * Offline notifications (`user_notification`, migration 022): a person's list and read marks, and the
 * webhook delivery queue on the shared claim mechanism (the rows are their own delivery rows).
 */
import type { CallbackQueue, ClaimedCallback } from '../../../core/callbacks/sendCallbacks.ts';
import type { NotificationType } from '../../../core/facts/notifications.ts';
import { notificationView } from '../../../core/notifications/inbox.ts';
import type {
  NotificationPosition,
  NotificationScope,
  NotificationStore,
  StoredNotification,
} from '../../../core/notifications/ports.ts';
import { afterFailure, type ClaimPolicy } from '../../../core/outbox/policy.ts';
import type { Sql } from './database.ts';
import { ClaimableRows } from './outboxQueue.ts';

interface NotificationRow {
  id: string;
  application_id: string;
  task_id: string;
  task_version: string;
  notification_type: NotificationType;
  severity: string;
  message: string;
  requires_action: boolean;
  created_at: Date;
  read_at: Date | null;
}

const stored = (row: NotificationRow): StoredNotification => ({
  id: row.id,
  applicationId: row.application_id,
  taskId: row.task_id,
  taskVersion: BigInt(row.task_version),
  type: row.notification_type,
  severity: row.severity,
  message: row.message,
  requiresAction: row.requires_action,
  createdAt: row.created_at,
  readAt: row.read_at,
});

export class PostgresNotificationStore implements NotificationStore {
  constructor(private readonly sql: Sql) {}

  private columns() {
    return this.sql`id, application_id, task_id, task_version::text AS task_version, notification_type,
      severity, message, requires_action, created_at, read_at`;
  }

  private mine(scope: NotificationScope) {
    return this.sql`tenant_id = ${scope.tenantId} AND user_id = ${scope.userId}
      AND application_id = ANY(${scope.applicationIds}::uuid[])`;
  }

  async page(scope: NotificationScope, limit: number, after: NotificationPosition | null) {
    // Unread first, then newest; every key descending, so one row comparison continues a page.
    const rest = after
      ? this
          .sql`AND ((read_at IS NULL), created_at, id) < (${after.unread}, ${after.createdAt}, ${after.id}::uuid)`
      : this.sql``;
    const rows = await this.sql<NotificationRow[]>`
      SELECT ${this.columns()} FROM user_notification
      WHERE ${this.mine(scope)} ${rest}
      ORDER BY (read_at IS NULL) DESC, created_at DESC, id DESC
      LIMIT ${limit}`;
    return rows.map(stored);
  }

  async unreadCount(scope: NotificationScope) {
    const [row] = await this.sql<{ count: string }[]>`
      SELECT count(*)::text AS count FROM user_notification WHERE ${this.mine(scope)} AND read_at IS NULL`;
    return Number(row?.count ?? 0);
  }

  async markRead(scope: NotificationScope, id: string, at: Date) {
    const [row] = await this.sql<NotificationRow[]>`
      UPDATE user_notification SET read_at = coalesce(read_at, ${at})
      WHERE id = ${id} AND ${this.mine(scope)}
      RETURNING ${this.columns()}`;
    return row ? stored(row) : null;
  }

  async markAllRead(scope: NotificationScope, at: Date) {
    const rows = await this.sql`
      UPDATE user_notification SET read_at = ${at} WHERE ${this.mine(scope)} AND read_at IS NULL RETURNING id`;
    return rows.length;
  }
}

/**
 * The notifications as a delivery queue for the callback sender (core/callbacks/sendCallbacks.ts): each
 * goes to the one configured webhook, signed with its application's callback secrets, and is retried
 * and given up on by `policy` (the notification settings), not the callbacks' own.
 */
export class PostgresNotificationDeliveries implements CallbackQueue {
  readonly rows: ClaimableRows;

  constructor(
    private readonly sql: Sql,
    private readonly webhookUrl: string,
    private readonly policy: ClaimPolicy,
  ) {
    this.rows = new ClaimableRows(sql, 'user_notification', policy);
  }

  async claim(now: Date, limit: number): Promise<ClaimedCallback[]> {
    const rows = await this.rows.claim<NotificationRow & { tenant_id: string; user_id: string }>(now, limit);
    return rows.map((row) => ({
      id: row.id,
      claimId: row.claim_id,
      attempts: row.attempts,
      applicationId: row.application_id,
      taskId: row.task_id,
      // The sender groups traces by execution; a notification belongs to its task.
      executionId: row.task_id,
      url: this.webhookUrl,
      payload: {
        kind: 'notification',
        schemaVersion: 1,
        tenantId: row.tenant_id,
        userId: row.user_id,
        ...notificationView(stored({ ...row, task_version: String(row.task_version) })),
      },
    }));
  }

  async delivered(claimId: string, id: string, _status: number, now: Date) {
    await this.rows.markPublished(claimId, [id], now);
  }

  async failed(claimId: string, id: string, attempts: number, error: string, now: Date, jitterMs: number) {
    const outcome = afterFailure(attempts, now, this.policy);
    if (outcome.status === 'DEAD') {
      await this.rows.markDead(claimId, id, error);
      return;
    }
    await this.sql`
      UPDATE user_notification SET status = 'FAILED', available_at = ${new Date(outcome.availableAt.getTime() + jitterMs)},
             last_error = ${error}, claim_id = NULL, claim_expires_at = NULL
      WHERE id = ${id} AND claim_id = ${claimId} AND status = 'PUBLISHING'`;
  }

  async dead(claimId: string, id: string, error: string) {
    await this.rows.markDead(claimId, id, error);
  }
}

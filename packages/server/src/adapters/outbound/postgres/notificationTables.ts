/** Offline notifications a fact leaves (`user_notification`, migration 022): a key written twice is skipped. */
import type { MergedWrites } from './mergeWrites.ts';
import { type Column, insertStatement, type RowStatement } from './recordset.ts';

const notificationColumns: Column[] = [
  ['id', 'uuid'],
  ['tenant_id', 'uuid'],
  ['application_id', 'uuid'],
  ['user_id', 'text'],
  ['task_id', 'uuid'],
  ['task_version', 'bigint'],
  ['notification_type', 'text'],
  ['severity', 'text'],
  ['message', 'text'],
  ['requires_action', 'boolean'],
  ['available_at', 'timestamptz'],
  ['created_at', 'timestamptz'],
];

export function pushNotificationStatements(w: MergedWrites, statements: RowStatement[]): void {
  if (w.notifications.length === 0) return;
  statements.push(
    insertStatement(
      'user_notification',
      notificationColumns,
      w.notifications.map((n) => ({
        id: n.id,
        tenant_id: n.tenantId,
        application_id: n.applicationId,
        user_id: n.userId,
        task_id: n.taskId,
        task_version: n.taskVersion,
        notification_type: n.type,
        severity: n.severity,
        message: n.message,
        requires_action: n.requiresAction,
        available_at: n.createdAt,
        created_at: n.createdAt,
      })),
      'ON CONFLICT ON CONSTRAINT user_notification_once DO NOTHING',
    ),
  );
}

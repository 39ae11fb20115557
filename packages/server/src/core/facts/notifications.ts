/**
 * Offline notifications (docs/notifications.md): the realtime channels only reach people who are connected,
 * so a terminal failure and a notice that asks someone to act are also kept as an unread record per
 * user. Recipients are the users who see the task's summary (its owner and the USER entries of its ACL;
 * project and role members are not known to TDP by name, they are told on their channels only). One
 * record per `userId + taskId + taskVersion + notificationType`: a second write of the same key is a
 * no-op in the store.
 */
import { type ChannelNotice, channels, type Notice } from './projections.ts';
import type { AclEntry, TaskState } from './records.ts';

export type NotificationType = 'TASK_FAILED' | 'TASK_TIMED_OUT' | 'ACTION_REQUIRED';

export interface NotificationRecord {
  id: string;
  tenantId: string;
  applicationId: string;
  userId: string;
  taskId: string;
  taskVersion: bigint;
  type: NotificationType;
  severity: Notice['severity'];
  message: string;
  requiresAction: boolean;
  createdAt: Date;
}

/** The notices worth telling someone who is not looking: terminal failures and requests to act. */
const offlineKinds: ReadonlySet<Notice['kind']> = new Set([
  'TASK_FAILED',
  'TASK_TIMED_OUT',
  'ACTION_REQUIRED',
]);

const isOffline = (notice: Notice | null | undefined) => notice != null && offlineKinds.has(notice.kind);

/** The users who see the task's summary: its owner and the USER principals of its live ACL. */
export function summaryUsers(state: TaskState, acl: AclEntry[]): string[] {
  const users = new Set<string>();
  if (state.task.ownerId) users.add(state.task.ownerId);
  for (const entry of acl) if (entry.principalType === 'USER') users.add(entry.principalId);
  return [...users];
}

/**
 * The records one fact leaves: its notice for every user who sees the task and, when the fact asks
 * some channels only to act (an approval's approvers), that notice for the users of those channels.
 */
export function notificationsFor(
  state: TaskState,
  acl: AclEntry[],
  notice: Notice | null,
  channelNotice: ChannelNotice | null,
  newId: () => string,
  at: Date,
): NotificationRecord[] {
  // Most facts carry no such notice: nothing to compute (this runs with every fact).
  if (!isOffline(notice) && !isOffline(channelNotice?.notice)) return [];
  const { tenantId, applicationId, id: taskId, version } = state.task;
  const users = summaryUsers(state, acl);
  const records: NotificationRecord[] = [];
  const add = (userId: string, told: Notice) => {
    if (!isOffline(told)) return;
    const type = told.kind as NotificationType;
    if (records.some((r) => r.userId === userId && r.type === type)) return;
    records.push({
      id: newId(),
      tenantId,
      applicationId,
      userId,
      taskId,
      taskVersion: version,
      type,
      severity: told.severity,
      message: told.message,
      requiresAction: told.requiresAction === true || type === 'ACTION_REQUIRED',
      createdAt: at,
    });
  };
  if (channelNotice) {
    const told = new Set(channelNotice.channels);
    for (const userId of users)
      if (told.has(channels.user(tenantId, applicationId, userId))) add(userId, channelNotice.notice);
  }
  if (notice) for (const userId of users) add(userId, notice);
  return records;
}

/**
 * A person's offline notifications (docs/notifications.md): listed unread first, then newest, with a
 * cursor; marked read one by one or all at once. Only the user of the token, within the applications
 * the token reaches (core/identity/userReach.ts), ever sees or changes them.
 */
import { reachedApplications } from '../identity/userReach.ts';
import { AppError } from '../shared/errors.ts';
import type { Clock } from '../shared/ports.ts';
import type { UserPrincipal } from '../status/ports.ts';
import type {
  NotificationPosition,
  NotificationScope,
  NotificationStore,
  StoredNotification,
} from './ports.ts';

export interface InboxDeps {
  store: NotificationStore;
  clock: Clock;
  /** Every application of a tenant (for a token with the tenant-wide user view). */
  applicationsOf(tenantId: string): Promise<string[]>;
}

export function notificationView(n: StoredNotification) {
  return {
    id: n.id,
    type: n.type,
    severity: n.severity,
    message: n.message,
    requiresAction: n.requiresAction,
    taskId: n.taskId,
    taskVersion: n.taskVersion.toString(),
    applicationId: n.applicationId,
    createdAt: n.createdAt.toISOString(),
    readAt: n.readAt?.toISOString() ?? null,
  };
}

async function scopeOf(deps: InboxDeps, user: UserPrincipal): Promise<NotificationScope> {
  const all = user.userView === 'TENANT' ? await deps.applicationsOf(user.tenantId) : [];
  return {
    tenantId: user.tenantId,
    applicationIds: reachedApplications(user, all),
    userId: user.viewer.userId,
  };
}

const encodeCursor = (n: StoredNotification) =>
  Buffer.from(`${n.readAt ? 0 : 1}|${n.createdAt.toISOString()}|${n.id}`).toString('base64url');

function decodeCursor(cursor: string): NotificationPosition {
  const [unread, at, id] = Buffer.from(cursor, 'base64url').toString().split('|');
  const createdAt = new Date(at ?? '');
  if (
    (unread !== '0' && unread !== '1') ||
    !id ||
    !/^[0-9a-f-]{36}$/i.test(id) ||
    Number.isNaN(createdAt.getTime())
  )
    throw new AppError('VALIDATION_FAILED', 'cursor is not valid');
  return { unread: unread === '1', createdAt, id };
}

export async function listNotifications(
  deps: InboxDeps,
  user: UserPrincipal,
  query: { limit: number; cursor?: string | undefined },
) {
  const after = query.cursor ? decodeCursor(query.cursor) : null;
  const scope = await scopeOf(deps, user);
  const [rows, unreadCount] = await Promise.all([
    deps.store.page(scope, query.limit + 1, after),
    deps.store.unreadCount(scope),
  ]);
  const page = rows.slice(0, query.limit);
  return {
    items: page.map(notificationView),
    unreadCount,
    nextCursor: rows.length > query.limit && page.length > 0 ? encodeCursor(page.at(-1)!) : null,
  };
}

export async function markNotificationRead(deps: InboxDeps, user: UserPrincipal, id: string) {
  const marked = await deps.store.markRead(await scopeOf(deps, user), id, deps.clock.now());
  if (!marked) throw new AppError('NOTIFICATION_NOT_FOUND', `notification ${id} does not exist`);
  return notificationView(marked);
}

export async function markAllNotificationsRead(deps: InboxDeps, user: UserPrincipal) {
  return { marked: await deps.store.markAllRead(await scopeOf(deps, user), deps.clock.now()) };
}

/** What the offline-notification use cases read and change (adapters/outbound/postgres/notificationStore.ts). */
import type { NotificationType } from '../facts/notifications.ts';

/** One person's notifications: theirs within the applications their token reaches. */
export interface NotificationScope {
  tenantId: string;
  applicationIds: string[];
  userId: string;
}

export interface StoredNotification {
  id: string;
  applicationId: string;
  taskId: string;
  taskVersion: bigint;
  type: NotificationType;
  severity: string;
  message: string;
  requiresAction: boolean;
  createdAt: Date;
  readAt: Date | null;
}

/** Where a page starts: after this row in the list's order (unread first, then newest). */
export interface NotificationPosition {
  unread: boolean;
  createdAt: Date;
  id: string;
}

export interface NotificationStore {
  page(
    scope: NotificationScope,
    limit: number,
    after: NotificationPosition | null,
  ): Promise<StoredNotification[]>;
  unreadCount(scope: NotificationScope): Promise<number>;
  /** Marks one read (kept as first read); null when it is not one of the scope's. */
  markRead(scope: NotificationScope, id: string, at: Date): Promise<StoredNotification | null>;
  /** Marks every unread one read; returns how many. */
  markAllRead(scope: NotificationScope, at: Date): Promise<number>;
}

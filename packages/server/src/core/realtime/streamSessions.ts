/**
 * Task streams (`GET /v1/me/task-stream`) known to every replica, for when a load balancer sends a
 * stream's watch-set PUT to another replica than the one holding the stream (with Centrifugo, where
 * replicas scale out). The replica that takes the PUT checks it and stores the watch set; the holder is
 * woken and applies what is stored.
 */

export interface StreamSessionRecord {
  sessionId: string;
  tenantId: string;
  applicationId: string;
  userId: string;
  taskIds: string[];
  watchExpiresAt: Date | null;
}

export interface SharedStreamSessions {
  open(session: Omit<StreamSessionRecord, 'taskIds' | 'watchExpiresAt'>, aliveUntil: Date): Promise<void>;
  close(sessionId: string): Promise<void>;
  /** The streams this replica still holds stay findable until `aliveUntil`; answers them as stored. */
  keepAlive(sessionIds: string[], aliveUntil: Date): Promise<StreamSessionRecord[]>;
  /** An open stream (its holder renewed it), or null. */
  find(sessionId: string, now: Date): Promise<StreamSessionRecord | null>;
  /** Stores the watch set and wakes the replica that holds the stream. */
  setWatch(sessionId: string, taskIds: string[], watchExpiresAt: Date): Promise<void>;
  /** Calls `listener` when another replica stored a watch set; resolves to the unlisten. */
  onWatchChanged(listener: (sessionId: string) => void): Promise<() => Promise<void>>;
}

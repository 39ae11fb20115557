/**
 * The REST calls a page makes as its person, with the user token its backend minted (`@tdp/sdk`'s
 * `createUserToken`): their tasks, batch snapshots, approval decisions, notifications. Backend calls
 * with the API key (creating, reading and cancelling tasks, realtime and user tokens) are `@tdp/sdk`'s
 * `TdpClient` alone. Errors arrive as `TdpError` with the problem's stable `code`.
 */
import type { TaskWithExecution } from '@tdp/protocol';
import type { NotificationItem, TaskListItem } from './taskStore.ts';

export class TdpError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly retryable: boolean,
    /** How long the server asked to wait before trying again (`Retry-After` of a 429 or 503). */
    readonly retryAfterSeconds?: number,
  ) {
    super(message);
    this.name = 'TdpError';
  }
}

export class TdpUserClient {
  constructor(
    private readonly options: {
      baseUrl: string;
      /** A user token, from the application's backend. */
      token: string;
      fetch?: typeof fetch;
    },
  ) {}

  private async call<T>(method: string, path: string, body?: unknown, headers: Record<string, string> = {}) {
    const response = await (this.options.fetch ?? fetch)(
      `${this.options.baseUrl.replace(/\/$/, '')}${path}`,
      {
        method,
        headers: {
          authorization: `Bearer ${this.options.token}`,
          ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
          ...headers,
        },
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      },
    );
    const text = await response.text();
    const parsed = text ? (JSON.parse(text) as unknown) : null;
    if (!response.ok) {
      const problem = (parsed ?? {}) as {
        code?: string;
        detail?: string;
        title?: string;
        retryable?: boolean;
      };
      const retryAfter = Number(response.headers.get('retry-after') ?? Number.NaN);
      throw new TdpError(
        response.status,
        problem.code ?? `HTTP_${response.status}`,
        problem.detail ?? problem.title ?? `${method} ${path} answered ${response.status}`,
        problem.retryable ?? response.status >= 500,
        Number.isFinite(retryAfter) && retryAfter >= 0 ? retryAfter : undefined,
      );
    }
    return parsed as T;
  }

  /**
   * With a user token: approve or reject a waiting approval step. The same `idempotencyKey` returns the
   * first answer; a different decision by the same person afterwards is DECISION_CONFLICT.
   */
  decideStep(
    taskId: string,
    stepKey: string,
    decision: 'approve' | 'reject',
    idempotencyKey: string,
    body: { comment?: string; data?: unknown } = {},
  ) {
    return this.call<{ decisionId: string; outcome: 'PENDING' | 'APPROVED' | 'REJECTED'; decidedAt: string }>(
      'POST',
      `/v1/tasks/${encodeURIComponent(taskId)}/steps/${encodeURIComponent(stepKey)}:${decision}`,
      body,
      { 'idempotency-key': idempotencyKey },
    );
  }

  /** With a user token: the person's tasks, most recently updated first (a `TaskStore` snapshot as is). */
  myTasks(options: { limit?: number; cursor?: string } = {}) {
    const query = new URLSearchParams();
    if (options.limit) query.set('limit', String(options.limit));
    if (options.cursor) query.set('cursor', options.cursor);
    const suffix = query.size > 0 ? `?${query}` : '';
    return this.call<{ items: TaskListItem[]; nextCursor: string | null }>('GET', `/v1/me/tasks${suffix}`);
  }

  /** With a user token: the person's notifications, unread first, then newest, and the unread count. */
  notifications(options: { limit?: number; cursor?: string } = {}) {
    const query = new URLSearchParams();
    if (options.limit) query.set('limit', String(options.limit));
    if (options.cursor) query.set('cursor', options.cursor);
    const suffix = query.size > 0 ? `?${query}` : '';
    return this.call<{ items: NotificationItem[]; unreadCount: number; nextCursor: string | null }>(
      'GET',
      `/v1/me/notifications${suffix}`,
    );
  }

  /** With a user token: marks one notification read (again: keeps the first time). */
  markNotificationRead(id: string) {
    return this.call<NotificationItem>('POST', `/v1/me/notifications/${encodeURIComponent(id)}:read`);
  }

  /** With a user token: marks every unread notification read. */
  markAllNotificationsRead() {
    return this.call<{ marked: number }>('POST', '/v1/me/notifications:readAll');
  }

  /** Current status of several tasks; those at the version you know come back without a body. */
  batchGet(tasks: { taskId: string; knownVersion?: string }[]) {
    return this.call<{
      items: {
        taskId: string;
        found: boolean;
        changed: boolean;
        taskVersion: string | null;
        snapshot?: TaskWithExecution;
      }[];
    }>('POST', '/v1/tasks/status:batchGet', { tasks });
  }
}

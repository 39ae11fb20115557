/**
 * The client-side task store (docs/realtime.md): what a page shows of the tasks a person may
 * see, kept right while messages arrive out of order, twice, or during a snapshot load.
 *
 * - Subscribe first, then load the snapshot: messages that arrive meanwhile are buffered and replayed
 *   on top of it, so nothing committed between the two is lost.
 * - Every task has two version gates, one for its summary and one for its detail (they travel on
 *   different channels and may arrive in any order relative to each other); a message not newer than
 *   its gate changes nothing.
 * - A notice (a failure, a finished task, an action required) is handed out once per notice id.
 * - A removal (the person lost access) deletes the task, and the gate keeps older messages from
 *   bringing it back. A re-grant can come at the task version of the removal it undoes: both carry an
 *   ACL version (`aclVersion`, one counter per grant), which orders them within one task version.
 *   A snapshot is the server's answer of now, so it brings back a task removed before it began.
 * - Elapsed time is counted locally from the task's start, stopping at a terminal state.
 *
 * Framework-free: the React hooks and the transport (the `centrifuge` SDK, or EventSource) sit on top.
 */

export type ConnectionState = 'LIVE' | 'RECOVERING' | 'STALE';

export interface Notice {
  id: string;
  kind: string;
  severity: 'INFO' | 'WARNING' | 'ERROR' | 'ACTION_REQUIRED';
  message: string;
}

/** `task.summary` as the realtime relay publishes it (user, project and role channels). */
export interface TaskSummary {
  kind: 'task.summary';
  taskId: string;
  workflowId: string;
  taskVersion: string;
  title: string;
  lifecycleStatus: string;
  businessStatus: string | null;
  health: string;
  progressPercent: number | null;
  error: { code: string; userMessage: string | null } | null;
  createdAt: string;
  updatedAt: string;
  startedAt: string | null;
  finishedAt: string | null;
  notice?: Notice | null;
  /** On the summary a grant announces: the grant's ACL version. */
  aclVersion?: string;
}

/**
 * A task as `GET /v1/me/tasks` lists it: the summary's fields without `kind` (nor a notice). The store
 * takes it as a summary, so a page can pass the list on as it comes.
 */
export type TaskListItem = Omit<TaskSummary, 'kind' | 'notice' | 'aclVersion'> & { kind?: undefined };

/** What a snapshot holds: the person's list (as REST or realtime gives it) and details. */
export type SnapshotItem = TaskListItem | TaskSummary | TaskDetail;

/** `task.detail` (the task's own channel): the whole current state, steps included. */
export interface TaskDetail {
  kind: 'task.detail';
  taskId: string;
  workflowId: string;
  taskVersion: string;
  state: {
    title: string;
    lifecycleStatus: string;
    progressPercent: number | null;
    startedAt: string | null;
    finishedAt: string | null;
    asOf: string;
    steps: TaskDetailStep[];
    [field: string]: unknown;
  };
  notice?: Notice | null;
}

/** One step of a `task.detail` (more fields than these: status, progress, error…). */
export interface TaskDetailStep {
  /** The step's key in its task. */
  stepKey: string;
  /** The current attempt's id; null before the step first runs. */
  attemptId: string | null;
  /** @deprecated use stepKey */
  stepId: string;
  /** @deprecated use attemptId */
  executionId: string | null;
  [field: string]: unknown;
}

/** Sent when a person loses access to a task. */
export interface TaskRemoved {
  kind: 'task.removed';
  taskId: string;
  taskVersion: string;
  /** The revoke's ACL version (a later grant's is higher). */
  aclVersion?: string;
}

export type TaskMessage = TaskSummary | TaskDetail | TaskRemoved;

/** A stored offline notification, as `GET /v1/me/notifications` lists it. */
export interface NotificationItem {
  id: string;
  type: 'TASK_FAILED' | 'TASK_TIMED_OUT' | 'ACTION_REQUIRED';
  severity: string;
  message: string;
  requiresAction: boolean;
  taskId: string;
  taskVersion: string;
  applicationId: string;
  createdAt: string;
  readAt: string | null;
}

/** The live notices the server also keeps as offline notifications (one per task version and kind). */
const storedNoticeKinds = new Set(['TASK_FAILED', 'TASK_TIMED_OUT', 'ACTION_REQUIRED']);

const terminal = new Set(['SUCCEEDED', 'FAILED', 'CANCELLED', 'TIMED_OUT']);

export function isTerminal(lifecycleStatus: string): boolean {
  return terminal.has(lifecycleStatus);
}

/**
 * How long a task has run, as of `now`: from its start to its end, or to now while it runs; null before
 * it starts. Counted locally, so a page shows a running clock without a message per second.
 */
export function elapsedMs(
  task: { lifecycleStatus: string; startedAt: string | null; finishedAt: string | null },
  now: number,
): number | null {
  if (!task.startedAt) return null;
  const start = Date.parse(task.startedAt);
  const end = task.finishedAt ? Date.parse(task.finishedAt) : isTerminal(task.lifecycleStatus) ? start : now;
  return Math.max(0, end - start);
}

type Listener = () => void;

/** Where a message stands in its task's order: its task version, then (within one) its ACL version. */
type Position = { version: bigint; acl: bigint };

function positionOf(message: TaskMessage): Position {
  const acl = 'aclVersion' in message && message.aclVersion ? BigInt(message.aclVersion) : 0n;
  return { version: BigInt(message.taskVersion), acl };
}

const isAfter = (a: Position, b: Position) =>
  a.version > b.version || (a.version === b.version && a.acl > b.acl);

export class TaskStore {
  private readonly summaries = new Map<string, TaskSummary>();
  private readonly details = new Map<string, TaskDetail>();
  /** Per task, the newest version applied (or removed at), for summaries and details separately. */
  private readonly summaryGate = new Map<string, Position>();
  private readonly detailGate = new Map<string, Position>();
  private readonly removedAt = new Map<string, Position>();
  private readonly seenNotices = new Set<string>();
  /** Unread notifications: the server's count, plus live notices of a kind it stores, each key once. */
  private unread = 0;
  private readonly unreadKeys = new Set<string>();
  private readonly readKeys = new Set<string>();
  private sorted: TaskSummary[] | null = null;
  private buffer: TaskMessage[] | null = null;
  private state: ConnectionState = 'RECOVERING';
  private readonly listeners = new Set<Listener>();
  private readonly noticeListeners = new Set<(notice: Notice, taskId: string) => void>();

  /**
   * `onVisible` hears, for each live message that changed what is shown, the seconds since the server
   * committed it (a `VisibilityReporter`'s `observe`); snapshot loads are not counted.
   */
  constructor(
    private readonly options: {
      onVisible?: (commitToVisibleSeconds: number) => void;
      now?: () => number;
    } = {},
  ) {}

  /** Called on every change; returns the unsubscribe function. */
  subscribe(listener: Listener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Each notice id reaches these listeners once. */
  onNotice(listener: (notice: Notice, taskId: string) => void): () => void {
    this.noticeListeners.add(listener);
    return () => this.noticeListeners.delete(listener);
  }

  /** How many of the person's notifications are unread (a badge). */
  get unreadNotifications(): number {
    return this.unread;
  }

  /**
   * The person's notifications as the server has them (`GET /v1/me/notifications`): its `unreadCount`
   * replaces the count; the listed ones are known, so their live notices do not count them again.
   */
  setNotifications(page: { unreadCount: number; items: NotificationItem[] }): void {
    this.unreadKeys.clear();
    for (const item of page.items) {
      const key = `${item.taskId}:${item.taskVersion}:${item.type}`;
      if (item.readAt) this.readKeys.add(key);
      else this.unreadKeys.add(key);
    }
    if (this.unread === page.unreadCount) return;
    this.unread = page.unreadCount;
    this.changed();
  }

  /** After `POST /v1/me/notifications/{id}:read` for `item` (once per item). */
  notificationRead(item: Pick<NotificationItem, 'taskId' | 'taskVersion' | 'type'>): void {
    const key = `${item.taskId}:${item.taskVersion}:${item.type}`;
    if (this.readKeys.has(key)) return;
    this.readKeys.add(key);
    this.unreadKeys.delete(key);
    this.unread = Math.max(0, this.unread - 1);
    this.changed();
  }

  /** After `POST /v1/me/notifications:readAll`. */
  allNotificationsRead(): void {
    for (const key of this.unreadKeys) this.readKeys.add(key);
    this.unreadKeys.clear();
    if (this.unread === 0) return;
    this.unread = 0;
    this.changed();
  }

  get connection(): ConnectionState {
    return this.state;
  }

  setConnection(state: ConnectionState): void {
    if (state === this.state) return;
    this.state = state;
    this.changed();
  }

  /** The person's tasks, newest first; the same array until something changes (for React). */
  myTasks(): TaskSummary[] {
    this.sorted ??= [...this.summaries.values()].sort((a, b) =>
      a.createdAt < b.createdAt ? 1 : a.createdAt > b.createdAt ? -1 : 0,
    );
    return this.sorted;
  }

  summary(taskId: string): TaskSummary | null {
    return this.summaries.get(taskId) ?? null;
  }

  detail(taskId: string): TaskDetail | null {
    return this.details.get(taskId) ?? null;
  }

  task(taskId: string): { summary: TaskSummary | null; detail: TaskDetail | null } {
    return { summary: this.summary(taskId), detail: this.detail(taskId) };
  }

  /** Starts a snapshot load: messages from now on are held until `endSnapshot`. */
  beginSnapshot(): void {
    this.buffer ??= [];
  }

  /**
   * Applies a snapshot (what `GET /v1/me/tasks` listed, as it comes, and details), then the messages that
   * arrived while it loaded; each through its gate, so the newest wins whatever the order.
   */
  endSnapshot(items: SnapshotItem[]): void {
    const held = this.buffer ?? [];
    this.buffer = null;
    let changed = false;
    for (const item of items) {
      this.removedAt.delete(item.taskId);
      changed = this.apply(asMessage(item)) || changed;
    }
    for (const item of held) changed = this.apply(item) || changed;
    if (changed) this.changed();
  }

  /** A message from the realtime channel. Returns whether it changed anything. */
  receive(message: TaskMessage): boolean {
    if (this.buffer) {
      this.buffer.push(message);
      return false;
    }
    const changed = this.apply(message);
    if (changed) {
      this.changed();
      const committedAt = committedAtOf(message);
      if (committedAt !== null && this.options.onVisible)
        this.options.onVisible(((this.options.now ?? Date.now)() - committedAt) / 1000);
    }
    return changed;
  }

  private apply(message: TaskMessage): boolean {
    const position = positionOf(message);
    const removed = this.removedAt.get(message.taskId);
    if (message.kind === 'task.removed') {
      if (removed !== undefined && !isAfter(position, removed)) return false;
      this.removedAt.set(message.taskId, position);
      // The removal's gate alone keeps older messages out; a later snapshot or grant starts afresh.
      this.summaryGate.delete(message.taskId);
      this.detailGate.delete(message.taskId);
      const had = this.summaries.has(message.taskId) || this.details.has(message.taskId);
      this.summaries.delete(message.taskId);
      this.details.delete(message.taskId);
      return had;
    }
    // Nothing older than the removal brings the task back.
    if (removed !== undefined && !isAfter(position, removed)) return false;
    const gate = message.kind === 'task.summary' ? this.summaryGate : this.detailGate;
    const known = gate.get(message.taskId);
    if (known !== undefined && !isAfter(position, known)) return false;
    gate.set(message.taskId, position);
    if (message.kind === 'task.summary') this.summaries.set(message.taskId, message);
    else this.details.set(message.taskId, message);
    if (message.notice && !this.seenNotices.has(message.notice.id)) {
      this.seenNotices.add(message.notice.id);
      this.countNotice(message.notice);
      for (const listener of this.noticeListeners) listener(message.notice, message.taskId);
    }
    return true;
  }

  /**
   * A live notice the server also stored counts as unread until the next `setNotifications`. (A notice
   * heard on a project or role channel is not stored for the person: the next load corrects the count.)
   */
  private countNotice(notice: Notice): void {
    if (!storedNoticeKinds.has(notice.kind)) return;
    // A notice's id is `taskId:taskVersion`.
    const key = `${notice.id}:${notice.kind}`;
    if (this.unreadKeys.has(key) || this.readKeys.has(key)) return;
    this.unreadKeys.add(key);
    this.unread += 1;
  }

  private changed(): void {
    this.sorted = null;
    for (const listener of this.listeners) listener();
  }
}

/** A list item of `GET /v1/me/tasks` carries no `kind`: it is the task's summary. */
function asMessage(item: SnapshotItem): TaskSummary | TaskDetail {
  return item.kind === undefined ? { ...item, kind: 'task.summary' } : item;
}

/** When the server committed the state a message shows (ms), or null if it does not say. */
function committedAtOf(message: TaskMessage): number | null {
  const at =
    message.kind === 'task.summary'
      ? message.updatedAt
      : message.kind === 'task.detail'
        ? message.state.asOf
        : null;
  const parsed = at ? Date.parse(at) : Number.NaN;
  return Number.isNaN(parsed) ? null : parsed;
}

import { describe, expect, it } from 'vitest';
import { elapsedMs, type TaskDetail, TaskStore, type TaskSummary } from '../src/index.ts';

const summary = (taskId: string, version: number, extra: Partial<TaskSummary> = {}): TaskSummary => ({
  kind: 'task.summary',
  taskId,
  workflowId: 'w',
  taskVersion: String(version),
  title: `task ${taskId}`,
  lifecycleStatus: 'RUNNING',
  businessStatus: null,
  health: 'HEALTHY',
  progressPercent: version * 10,
  error: null,
  createdAt: `2026-01-01T00:00:0${taskId.length}Z`,
  updatedAt: '2026-01-01T00:00:00Z',
  startedAt: '2026-01-01T00:00:00Z',
  finishedAt: null,
  ...extra,
});
const detail = (taskId: string, version: number): TaskDetail => ({
  kind: 'task.detail',
  taskId,
  workflowId: 'w',
  taskVersion: String(version),
  state: {
    title: 't',
    lifecycleStatus: 'RUNNING',
    progressPercent: version,
    startedAt: null,
    finishedAt: null,
    asOf: '2026-01-01T00:00:00Z',
    steps: [],
  },
});

describe('TaskStore', () => {
  it('applies a message only when it is newer than what it has, summaries and details each by their own gate', () => {
    const store = new TaskStore();
    store.endSnapshot([]);
    expect(store.receive(summary('a', 3))).toBe(true);
    expect(store.receive(summary('a', 2))).toBe(false);
    expect(store.receive(summary('a', 3))).toBe(false);
    // A detail of version 2 is new to the detail gate, whatever the summary's.
    expect(store.receive(detail('a', 2))).toBe(true);
    expect(store.receive(summary('a', 4))).toBe(true);
    expect(store.task('a').summary?.taskVersion).toBe('4');
    expect(store.task('a').detail?.taskVersion).toBe('2');
  });

  it('holds messages that arrive during a snapshot load and replays them on top of it', () => {
    const store = new TaskStore();
    const changes: number[] = [];
    store.subscribe(() => changes.push(store.myTasks().length));
    store.beginSnapshot();
    expect(store.receive(summary('a', 5))).toBe(false); // held
    store.receive(summary('b', 1));
    expect(store.myTasks()).toEqual([]);
    // The snapshot is older for a (version 4) and does not know b yet.
    store.endSnapshot([summary('a', 4), summary('c', 2)]);
    expect(store.task('a').summary?.taskVersion).toBe('5');
    expect(
      store
        .myTasks()
        .map((t) => t.taskId)
        .sort(),
    ).toEqual(['a', 'b', 'c']);
    expect(changes).toEqual([3]);
  });

  it('takes a list item of GET /v1/me/tasks (no kind) as the summary, behind the same gate as live ones', () => {
    const store = new TaskStore();
    store.beginSnapshot();
    store.receive(summary('b', 3)); // held while the list loads
    const { kind: _kind, notice: _notice, ...listed } = summary('a', 4);
    const { kind: _kindB, notice: _noticeB, ...olderB } = summary('b', 2);
    store.endSnapshot([listed, olderB]);
    expect(store.summary('a')).toEqual(summary('a', 4));
    expect(store.summary('b')?.taskVersion).toBe('3');
    expect(store.detail('a')).toBeNull();
    expect(store.receive(summary('a', 4))).toBe(false);
    expect(store.receive(summary('a', 5))).toBe(true);
  });

  it('hands out each notice once, however often its message arrives', () => {
    const store = new TaskStore();
    store.endSnapshot([]);
    const notices: string[] = [];
    store.onNotice((notice, taskId) => notices.push(`${taskId}:${notice.id}`));
    const failed = summary('a', 7, {
      lifecycleStatus: 'FAILED',
      notice: { id: 'a:7', kind: 'TASK_FAILED', severity: 'ERROR', message: 'it failed' },
    });
    store.receive(failed);
    store.receive(failed);
    store.receive({ ...detail('a', 7), notice: failed.notice ?? null });
    expect(notices).toEqual(['a:a:7']);
  });

  it('a removal deletes the task, and older messages do not bring it back', () => {
    const store = new TaskStore();
    store.endSnapshot([summary('a', 2), detail('a', 2)]);
    expect(store.receive({ kind: 'task.removed', taskId: 'a', taskVersion: '3' })).toBe(true);
    expect(store.task('a')).toEqual({ summary: null, detail: null });
    expect(store.receive(summary('a', 3))).toBe(false);
    expect(store.receive(summary('a', 4))).toBe(true);
  });

  it('a re-grant at the version of the revoke it undoes brings the task back; a stale copy does not', () => {
    const store = new TaskStore();
    store.endSnapshot([summary('a', 5)]);
    store.receive({ kind: 'task.removed', taskId: 'a', taskVersion: '5', aclVersion: '2' });
    expect(store.summary('a')).toBeNull();
    expect(store.receive(summary('a', 5))).toBe(false); // a copy from before the revoke
    expect(store.receive(summary('a', 5, { aclVersion: '1' }))).toBe(false); // the grant it revoked
    expect(store.receive(summary('a', 5, { aclVersion: '3' }))).toBe(true);
    expect(store.summary('a')?.taskVersion).toBe('5');
    expect(store.receive(summary('a', 6))).toBe(true);
  });

  it('a snapshot brings back a task removed before it began', () => {
    const store = new TaskStore();
    store.endSnapshot([summary('a', 5)]);
    store.receive({ kind: 'task.removed', taskId: 'a', taskVersion: '5', aclVersion: '2' });
    store.beginSnapshot();
    store.endSnapshot([summary('a', 5), detail('a', 5)]);
    expect(store.task('a').summary?.taskVersion).toBe('5');
    expect(store.task('a').detail?.taskVersion).toBe('5');
  });

  it('tells the connection state to its listeners', () => {
    const store = new TaskStore();
    let seen = '';
    store.subscribe(() => {
      seen = store.connection;
    });
    expect(store.connection).toBe('RECOVERING');
    store.setConnection('LIVE');
    expect(seen).toBe('LIVE');
  });
});

describe('elapsedMs', () => {
  const start = '2026-01-01T00:00:00.000Z';
  const now = Date.parse(start) + 5_000;
  it('counts to now while running, to the end once finished, nothing before the start', () => {
    expect(elapsedMs({ lifecycleStatus: 'RUNNING', startedAt: start, finishedAt: null }, now)).toBe(5_000);
    expect(
      elapsedMs(
        { lifecycleStatus: 'SUCCEEDED', startedAt: start, finishedAt: '2026-01-01T00:00:02.000Z' },
        now,
      ),
    ).toBe(2_000);
    expect(elapsedMs({ lifecycleStatus: 'PENDING', startedAt: null, finishedAt: null }, now)).toBeNull();
  });
});

describe('unread notifications', () => {
  const item = (taskId: string, version: number, readAt: string | null = null) => ({
    id: `n-${taskId}-${version}`,
    type: 'TASK_FAILED' as const,
    severity: 'ERROR',
    message: 'failed',
    requiresAction: false,
    taskId,
    taskVersion: String(version),
    applicationId: 'app',
    createdAt: '2026-01-01T00:00:00Z',
    readAt,
  });
  const failed = (taskId: string, version: number, kind = 'TASK_FAILED') =>
    summary(taskId, version, {
      lifecycleStatus: 'FAILED',
      notice: { id: `${taskId}:${version}`, kind, severity: 'ERROR', message: 'failed' },
    });

  it("counts the server's unread ones and each new stored kind of live notice once; read marks lower it", () => {
    const store = new TaskStore();
    store.endSnapshot([]);
    let changes = 0;
    store.subscribe(() => {
      changes += 1;
    });
    store.setNotifications({ unreadCount: 2, items: [item('a', 3), item('b', 4), item('c', 1, 'read')] });
    expect(store.unreadNotifications).toBe(2);
    expect(changes).toBe(1);
    // Already listed (unread or read): not counted again.
    store.receive(failed('a', 3));
    store.receive(failed('c', 1));
    expect(store.unreadNotifications).toBe(2);
    // A new failure counts once, however often it arrives; a success is not stored, so it does not count.
    store.receive(failed('d', 7));
    store.receive(failed('d', 7));
    store.receive(failed('e', 2, 'TASK_SUCCEEDED'));
    expect(store.unreadNotifications).toBe(3);
    store.notificationRead(item('a', 3));
    store.notificationRead(item('a', 3));
    expect(store.unreadNotifications).toBe(2);
    store.allNotificationsRead();
    expect(store.unreadNotifications).toBe(0);
    // The server's count wins at the next load.
    store.setNotifications({ unreadCount: 1, items: [item('f', 1)] });
    expect(store.unreadNotifications).toBe(1);
  });
});

/**
 * The React hooks read the store through useSyncExternalStore: what they render follows the store, and
 * their snapshots are stable between changes (an unstable one makes React loop).
 */
import { createElement } from 'react';
import { renderToString } from 'react-dom/server';
import { describe, expect, it } from 'vitest';
import { TaskStoreProvider, useConnectionState, useMyTasks, useTask } from '../src/react.ts';
import { TaskStore, type TaskSummary } from '../src/taskStore.ts';

const summary = (taskId: string, version: number, lifecycleStatus = 'RUNNING'): TaskSummary => ({
  kind: 'task.summary',
  taskId,
  workflowId: 'w',
  taskVersion: String(version),
  title: `task ${taskId}`,
  lifecycleStatus,
  businessStatus: null,
  health: 'HEALTHY',
  progressPercent: null,
  error: null,
  createdAt: `2026-01-01T00:00:0${version}.000Z`,
  updatedAt: '2026-01-01T00:00:00.000Z',
  startedAt: null,
  finishedAt: null,
});

function List() {
  const tasks = useMyTasks();
  const state = useConnectionState();
  return createElement(
    'ul',
    { 'data-state': state },
    ...tasks.map((t) => createElement('li', { key: t.taskId }, `${t.taskId}:${t.lifecycleStatus}`)),
  );
}

function One(props: { taskId: string }) {
  const { summary: found } = useTask(props.taskId);
  return createElement('p', null, found ? `${found.title} v${found.taskVersion}` : 'unknown');
}

const render = (store: TaskStore, child: ReturnType<typeof createElement>) =>
  renderToString(createElement(TaskStoreProvider, { store }, child));

describe('React hooks', () => {
  it('useMyTasks and useTask render what the store holds, newest first, and follow its changes', () => {
    const store = new TaskStore();
    store.endSnapshot([summary('a', 1)]);
    store.receive(summary('b', 2));
    expect(render(store, createElement(List))).toBe(
      '<ul data-state="RECOVERING"><li>b:RUNNING</li><li>a:RUNNING</li></ul>',
    );
    store.receive(summary('a', 3, 'SUCCEEDED'));
    store.setConnection('LIVE');
    expect(render(store, createElement(List))).toBe(
      '<ul data-state="LIVE"><li>a:SUCCEEDED</li><li>b:RUNNING</li></ul>',
    );
    expect(render(store, createElement(One, { taskId: 'b' }))).toBe('<p>task b v2</p>');
    expect(render(store, createElement(One, { taskId: 'zzz' }))).toBe('<p>unknown</p>');
  });

  it('hands out the same snapshot until something changes', () => {
    const store = new TaskStore();
    store.endSnapshot([summary('a', 1)]);
    const first = store.myTasks();
    expect(store.myTasks()).toBe(first);
    store.receive(summary('a', 1));
    expect(store.myTasks()).toBe(first);
    store.receive(summary('a', 2));
    expect(store.myTasks()).not.toBe(first);
  });

  it('needs a provider', () => {
    expect(() => renderToString(createElement(List))).toThrow(/TaskStoreProvider/);
  });
});

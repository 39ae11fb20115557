/**
 * React bindings of the task store: `<TaskStoreProvider store={…}>` once, then `useMyTasks()`,
 * `useTask(taskId)`, `useConnectionState()` and `useElapsed(task)` anywhere below it. Each hook reads
 * through `useSyncExternalStore`, so a component re-renders only when what it shows changed.
 */
import {
  createContext,
  createElement,
  type ReactNode,
  useContext,
  useEffect,
  useState,
  useSyncExternalStore,
} from 'react';
import {
  type ConnectionState,
  elapsedMs,
  isTerminal,
  type TaskDetail,
  TaskStore,
  type TaskSummary,
} from './taskStore.ts';

const StoreContext = createContext<TaskStore | null>(null);

export function TaskStoreProvider(props: { store: TaskStore; children?: ReactNode }) {
  return createElement(StoreContext.Provider, { value: props.store }, props.children);
}

function useStore(): TaskStore {
  const store = useContext(StoreContext);
  if (!store) throw new Error('useMyTasks/useTask need a <TaskStoreProvider> above them');
  return store;
}

const subscribeTo = (store: TaskStore) => (listener: () => void) => store.subscribe(listener);

/** The person's tasks, newest first, live. */
export function useMyTasks(): TaskSummary[] {
  const store = useStore();
  return useSyncExternalStore(
    subscribeTo(store),
    () => store.myTasks(),
    () => store.myTasks(),
  );
}

/** One task's summary and detail (the detail once the page follows the task), live. */
export function useTask(taskId: string): { summary: TaskSummary | null; detail: TaskDetail | null } {
  const store = useStore();
  const subscribe = subscribeTo(store);
  const summary = useSyncExternalStore(
    subscribe,
    () => store.summary(taskId),
    () => store.summary(taskId),
  );
  const detail = useSyncExternalStore(
    subscribe,
    () => store.detail(taskId),
    () => store.detail(taskId),
  );
  return { summary, detail };
}

export function useConnectionState(): ConnectionState {
  const store = useStore();
  return useSyncExternalStore(
    subscribeTo(store),
    () => store.connection,
    () => store.connection,
  );
}

/** Milliseconds a task has run, ticking locally every `intervalMs` until it ends. */
export function useElapsed(
  task: { lifecycleStatus: string; startedAt: string | null; finishedAt: string | null } | null,
  intervalMs = 1_000,
): number | null {
  const [now, setNow] = useState(() => Date.now());
  const running = task !== null && task.startedAt !== null && !isTerminal(task.lifecycleStatus);
  useEffect(() => {
    if (!running) return;
    const timer = setInterval(() => setNow(Date.now()), intervalMs);
    return () => clearInterval(timer);
  }, [running, intervalMs]);
  return task ? elapsedMs(task, now) : null;
}

export { TaskStore };

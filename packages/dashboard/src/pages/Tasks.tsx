import { useCallback, useEffect, useRef, useState } from 'react';
import { api, type LifecycleStatus, lifecycleStatuses, type TaskList, type TaskRow } from '../api.ts';
import { ago, elapsed, Progress, StatusBadge, useTick } from '../format.tsx';
import type { LiveFeed, TaskSummaryMessage } from '../live.ts';

interface Filters {
  status: LifecycleStatus | '';
  applicationId: string;
  workflow: string;
}

const matches = (message: TaskSummaryMessage, filters: Filters) =>
  (!filters.status || message.lifecycleStatus === filters.status) &&
  (!filters.applicationId || message.applicationId === filters.applicationId) &&
  (!filters.workflow || message.workflowName === filters.workflow);

/** A summary message as a row; fields the message does not carry are kept from the row it replaces. */
function rowOf(message: TaskSummaryMessage, previous: TaskRow | undefined): TaskRow {
  return {
    ...(previous ?? { applicationName: undefined }),
    id: message.taskId,
    tenantId: message.tenantId,
    applicationId: message.applicationId,
    workflowName: message.workflowName,
    name: message.title,
    lifecycleStatus: message.lifecycleStatus as LifecycleStatus,
    health: message.health,
    version: message.taskVersion,
    progress: message.progressPercent,
    failure: message.error,
    createdAt: message.createdAt,
    updatedAt: message.updatedAt,
    startedAt: message.startedAt,
    finishedAt: message.finishedAt,
  };
}

export function Tasks({ feed }: { feed: LiveFeed }) {
  const [filters, setFilters] = useState<Filters>({ status: '', applicationId: '', workflow: '' });
  const [list, setList] = useState<TaskList | null>(null);
  const [error, setError] = useState<string | null>(null);
  const filtersRef = useRef(filters);
  filtersRef.current = filters;

  const load = useCallback(async () => {
    const query = new URLSearchParams();
    if (filters.status) query.set('status', filters.status);
    if (filters.applicationId) query.set('applicationId', filters.applicationId);
    if (filters.workflow) query.set('workflow', filters.workflow);
    try {
      setList(await api<TaskList>(`/tasks?${query}`));
      setError(null);
    } catch (failure) {
      setError((failure as Error).message);
    }
  }, [filters]);

  useEffect(() => {
    void load();
  }, [load]);

  // Counts move with every change: they are read again (a count over every task), at most every 3 s.
  const countsTimer = useRef<ReturnType<typeof setTimeout> | null>(null);
  useEffect(() => {
    const offMessage = feed.onMessage((message) => {
      setList((current) => {
        if (!current) return current;
        const index = current.items.findIndex((row) => row.id === message.taskId);
        const previous = index >= 0 ? current.items[index] : undefined;
        if (previous && BigInt(previous.version) >= BigInt(message.taskVersion)) return current;
        const others = current.items.filter((row) => row.id !== message.taskId);
        const row = rowOf(message, previous);
        row.applicationName ??= current.applications.find((a) => a.id === row.applicationId)?.name;
        return {
          ...current,
          items: matches(message, filtersRef.current) ? [row, ...others] : others,
        };
      });
      countsTimer.current ??= setTimeout(() => {
        countsTimer.current = null;
        void load();
      }, 3_000);
    });
    const offResync = feed.onResync(() => void load());
    return () => {
      offMessage();
      offResync();
    };
  }, [feed, load]);

  const now = useTick(list?.items.some((row) => !row.finishedAt) ?? false);
  if (error && !list) return <div className="panel error">Could not load the tasks: {error}</div>;
  if (!list) return <p className="loading">Loading tasks…</p>;
  const total = Object.values(list.counts).reduce((a, b) => a + b, 0);
  return (
    <section>
      <div className="filters">
        <fieldset className="counts" aria-label="Filter by status">
          <button
            type="button"
            className={filters.status === '' ? 'active' : ''}
            onClick={() => setFilters({ ...filters, status: '' })}
          >
            All <b data-count="ALL">{total}</b>
          </button>
          {lifecycleStatuses.map((status) => (
            <button
              key={status}
              type="button"
              className={filters.status === status ? 'active' : ''}
              onClick={() => setFilters({ ...filters, status })}
            >
              {status} <b data-count={status}>{list.counts[status]}</b>
            </button>
          ))}
        </fieldset>
        <select
          aria-label="Application"
          value={filters.applicationId}
          onChange={(e) => setFilters({ ...filters, applicationId: e.target.value })}
        >
          <option value="">All applications</option>
          {list.applications.map((a) => (
            <option key={a.id} value={a.id}>
              {a.name}
            </option>
          ))}
        </select>
        <select
          aria-label="Workflow"
          value={filters.workflow}
          onChange={(e) => setFilters({ ...filters, workflow: e.target.value })}
        >
          <option value="">All workflows</option>
          {list.workflows.map((w) => (
            <option key={w} value={w}>
              {w}
            </option>
          ))}
        </select>
      </div>
      {list.items.length === 0 ? (
        <p className="muted">No tasks match.</p>
      ) : (
        <table className="tasks">
          <thead>
            <tr>
              <th>Task</th>
              <th>Status</th>
              <th>Progress</th>
              <th>Duration</th>
              <th>Application</th>
              <th>Workflow</th>
              <th>Updated</th>
            </tr>
          </thead>
          <tbody>
            {list.items.map((task) => (
              <tr key={task.id} data-task-id={task.id}>
                <td>
                  <a href={`#/tasks/${task.id}`}>{task.name}</a>
                  {task.failure ? (
                    <div className="failure">{task.failure.userMessage ?? task.failure.code}</div>
                  ) : null}
                </td>
                <td>
                  <StatusBadge status={task.lifecycleStatus} />
                  {task.health !== 'HEALTHY' ? <span className="health">{task.health}</span> : null}
                </td>
                <td>
                  <Progress percent={task.progress} />
                </td>
                <td>
                  {task.finishedAt
                    ? elapsed(task.createdAt, task.finishedAt, now)
                    : task.startedAt
                      ? elapsed(task.startedAt, null, now)
                      : `waiting ${elapsed(task.createdAt, null, now)}`}
                </td>
                <td>{task.applicationName ?? task.applicationId.slice(0, 8)}</td>
                <td>{task.workflowName ?? '—'}</td>
                <td className="muted">{ago(task.updatedAt, now)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}

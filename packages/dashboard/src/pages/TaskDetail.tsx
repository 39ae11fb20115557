import { useCallback, useEffect, useRef, useState } from 'react';
import { type ApprovalWaiting, api, type TaskDetail } from '../api.ts';
import { Dag } from '../Dag.tsx';
import { duration, elapsed, Progress, StatusBadge, stepElapsedMs, useTick } from '../format.tsx';
import type { LiveFeed } from '../live.ts';
import { ApprovalActions } from './ApprovalActions.tsx';
import { WaitingNote } from './WaitingNote.tsx';

const time = (at: string | null) => (at ? new Date(at).toLocaleTimeString() : '—');

export function TaskDetailPage({ taskId, feed }: { taskId: string; feed: LiveFeed }) {
  const [detail, setDetail] = useState<TaskDetail | null>(null);
  const [error, setError] = useState<string | null>(null);
  const load = useCallback(async () => {
    try {
      setDetail(await api<TaskDetail>(`/tasks/${taskId}`));
      setError(null);
    } catch (failure) {
      setError((failure as Error).message);
    }
  }, [taskId]);
  useEffect(() => {
    void load();
  }, [load]);
  // A change of this task (any summary message for it) reloads the detail, coalesced.
  const pending = useRef<ReturnType<typeof setTimeout> | null>(null);
  useEffect(() => {
    const off = feed.onMessage((message) => {
      if (message.taskId !== taskId) return;
      pending.current ??= setTimeout(() => {
        pending.current = null;
        void load();
      }, 100);
    });
    const offResync = feed.onResync(() => void load());
    return () => {
      off();
      offResync();
    };
  }, [feed, taskId, load]);

  // Why a ready step is not placed is written by the scheduler's round, which changes nothing of the
  // task and so publishes nothing: while a step waits for a worker, the detail is read again.
  const waitingForWorker = detail?.execution.steps.some((s) => s.status === 'READY') ?? false;
  useEffect(() => {
    if (!waitingForWorker) return;
    const timer = setInterval(() => void load(), 3_000);
    return () => clearInterval(timer);
  }, [waitingForWorker, load]);

  const running = detail?.execution.steps.some((s) => s.status === 'RUNNING') ?? false;
  const now = useTick(running);
  if (error && !detail) return <div className="panel error">Could not load the task: {error}</div>;
  if (!detail) return <p className="loading">Loading the task…</p>;
  const { task, execution } = detail;
  const stepsByKey = new Map(execution.steps.map((s) => [s.key, s]));
  const nodes = detail.dag.map((node) => {
    const step = stepsByKey.get(node.key);
    return {
      ...node,
      ...(step
        ? {
            status: step.status,
            waiting: step.status === 'RUNNING' ? (step.waitingFor?.kind ?? null) : null,
            percent: step.progress?.percent ?? null,
            elapsedMs: stepElapsedMs(step, now),
          }
        : {}),
    };
  });
  return (
    <section className="detail">
      <p>
        <a href="#/tasks">← Tasks</a>
      </p>
      <div className="panel">
        <h1>
          {task.name} <StatusBadge status={task.lifecycleStatus} />
        </h1>
        <dl className="facts">
          <dt>Task</dt>
          <dd className="mono">{task.id}</dd>
          <dt>Workflow</dt>
          <dd>
            {task.workflowName ?? '—'} · execution #{execution.number} ({execution.status})
          </dd>
          <dt>Engine</dt>
          <dd data-engine={execution.orchestration.engine}>
            {execution.orchestration.workflowId ? (
              <>
                Temporal · workflow <span className="mono">{execution.orchestration.workflowId}</span>
              </>
            ) : (
              'TDP (native)'
            )}
          </dd>
          {task.parentTaskId ? (
            <>
              <dt>Parent task</dt>
              <dd className="mono">
                <a href={`#/tasks/${task.parentTaskId}`} data-parent-task={task.parentTaskId}>
                  {task.parentTaskId}
                </a>
              </dd>
            </>
          ) : null}
          <dt>Progress</dt>
          <dd>
            <Progress percent={execution.progress} />
          </dd>
          <dt>{task.finishedAt ? 'Took' : 'Running for'}</dt>
          <dd>
            {task.finishedAt && task.totalDurationMs !== null
              ? `${duration(task.totalDurationMs)} from submit to finish`
              : elapsed(task.startedAt, null, now)}
          </dd>
          <dt>External ref</dt>
          <dd>{task.externalRef ?? '—'}</dd>
          {task.failure ? (
            <>
              <dt>Failure</dt>
              <dd className="failure">
                {task.failure.code}: {task.failure.userMessage ?? ''}
                {task.failure.detail ? <div className="muted detail">{task.failure.detail}</div> : null}
              </dd>
            </>
          ) : null}
        </dl>
      </div>
      <div className="panel">
        <h2>Steps</h2>
        <Dag nodes={nodes} />
        <table>
          <thead>
            <tr>
              <th>Step</th>
              <th>Status</th>
              <th>Attempt</th>
              <th>Progress</th>
              <th>Elapsed</th>
              <th>Notes</th>
            </tr>
          </thead>
          <tbody>
            {execution.steps.map((step) => (
              <tr
                key={step.id}
                data-step-row={step.key}
                // A ready step no worker can take stands out, with why (a misspelt capability, say).
                className={step.unschedulableReasons?.length ? 'waiting-for-worker' : undefined}
              >
                <td>
                  {step.key} <span className="muted">{step.capability}</span>
                </td>
                <td>
                  <StatusBadge status={step.status} />
                </td>
                <td>{step.attempt}</td>
                <td>
                  <Progress percent={step.progress?.percent ?? null} />
                </td>
                <td>{stepElapsedMs(step, now) === null ? '—' : duration(stepElapsedMs(step, now)!)}</td>
                <td>
                  {step.error ? (
                    <span className="failure" title={step.error.detail ?? undefined}>
                      {step.error.userMessage ?? step.error.code}
                    </span>
                  ) : null}
                  {step.status === 'RUNNING' && step.waitingFor?.kind === 'approval' ? (
                    <ApprovalActions
                      taskId={task.id}
                      stepKey={step.key}
                      waiting={step.waitingFor as ApprovalWaiting}
                      onDecided={() => void load()}
                    />
                  ) : null}
                  {step.status === 'RUNNING' && step.waitingFor && step.waitingFor.kind !== 'approval' ? (
                    <WaitingNote
                      taskId={task.id}
                      waiting={step.waitingFor as { kind: string } & Record<string, unknown>}
                      onSent={() => void load()}
                    />
                  ) : null}
                  {step.unschedulableReasons?.length ? (
                    <div className="waiting-title">Waiting for a worker:</div>
                  ) : null}
                  {step.unschedulableReasons?.map((reason) => (
                    <div key={reason} className="reason">
                      {reason}
                    </div>
                  ))}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      <div className="panel">
        <h2>Attempts</h2>
        <table>
          <thead>
            <tr>
              <th>Step</th>
              <th>Worker</th>
              <th>Lease</th>
              <th>Placed</th>
              <th>Started</th>
              <th>Finished</th>
            </tr>
          </thead>
          <tbody>
            {detail.attempts.map((attempt) => (
              <tr key={attempt.id}>
                <td>
                  {attempt.stepKey} #{attempt.attempt}
                </td>
                <td>
                  {attempt.workerName ?? '—'} <span className="muted">{attempt.nodeId}</span>
                </td>
                <td>v{attempt.leaseVersion}</td>
                <td>{time(attempt.createdAt)}</td>
                <td>{time(attempt.startedAt)}</td>
                <td>
                  {attempt.revokedAt && !attempt.finishedAt
                    ? `revoked ${time(attempt.revokedAt)}`
                    : time(attempt.finishedAt)}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      <div className="columns">
        <div className="panel">
          <h2>Timeline</h2>
          <ol className="timeline">
            {detail.timeline.map((entry) => (
              <li key={`${entry.at}-${entry.kind}-${entry.message}`}>
                <span className="muted">{time(entry.at)}</span> {entry.message}
              </li>
            ))}
          </ol>
        </div>
        <div className="panel">
          <h2>Callbacks</h2>
          {detail.callbacks.length === 0 ? (
            <p className="muted">This task has no callback URL.</p>
          ) : (
            <table className="callbacks">
              <thead>
                <tr>
                  <th>#</th>
                  <th>Event</th>
                  <th>Status</th>
                  <th>Tries</th>
                  <th>Answer</th>
                </tr>
              </thead>
              <tbody>
                {detail.callbacks.map((c) => (
                  <tr key={c.id}>
                    <td>{c.sequence}</td>
                    <td>{c.eventType}</td>
                    <td>
                      <StatusBadge status={c.status} />
                    </td>
                    <td>{c.attempts}</td>
                    <td>{c.responseStatus ?? c.lastError ?? '—'}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          )}
        </div>
      </div>
    </section>
  );
}

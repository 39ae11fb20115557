import { usePolled } from '../api.ts';
import { duration } from '../format.tsx';
import { useCan } from '../session.ts';
import { WorkerActions } from './WorkerActions.tsx';

interface WorkerView {
  id: string;
  name: string;
  nodeId: string;
  nodeStatus: string;
  labels: Record<string, string>;
  claimedLabels: Record<string, string>;
  capabilities: { name: string; version: string }[];
  resources: Record<string, unknown> | null;
  runtimeState: string;
  schedulingStatus?: string;
  runningAttempts: number;
  maxConcurrency: number;
  heartbeatAgeMs: number;
}

interface Queued {
  taskId: string;
  taskName: string;
  stepKey: string;
  capability: string;
  reasons: string[];
  waitingSince: string;
}

const labels = (map: Record<string, string> | null | undefined) =>
  Object.entries(map ?? {})
    .map(([k, v]) => `${k}=${v}`)
    .join(', ') || '—';

/**
 * Worker sessions and the steps waiting for one (with why they cannot be placed), read every 2 s; drain
 * and cordon for platform-wide operators.
 */
export function Workers() {
  const { actOnPlatform } = useCan();
  const { data, error, reload } = usePolled<{ workers: WorkerView[]; queued: Queued[] }>('/workers', 2_000);
  if (error && !data) return <div className="panel error">Could not load the workers: {error}</div>;
  if (!data) return <p className="loading">Loading workers…</p>;
  return (
    <section>
      <div className="panel">
        <h2>Workers</h2>
        {data.workers.length === 0 ? (
          <p className="muted">No worker is connected.</p>
        ) : (
          <table>
            <thead>
              <tr>
                <th>Worker</th>
                <th>Node</th>
                <th>State</th>
                <th>Capabilities</th>
                <th>Labels (trusted)</th>
                <th>Resources</th>
                <th>Running</th>
                <th>Heartbeat</th>
                {actOnPlatform ? <th>Operator</th> : null}
              </tr>
            </thead>
            <tbody>
              {data.workers.map((w) => (
                <tr key={w.id} data-worker-id={w.id}>
                  <td>{w.name}</td>
                  <td>
                    {w.nodeId} <span className="muted">{w.nodeStatus}</span>
                  </td>
                  <td data-state={w.runtimeState}>
                    {w.runtimeState}
                    {w.schedulingStatus === 'INELIGIBLE' ? <div className="muted">CORDONED</div> : null}
                  </td>
                  <td>{w.capabilities.map((c) => `${c.name}@${c.version}`).join(', ')}</td>
                  <td>
                    {labels(w.labels)}
                    {Object.keys(w.claimedLabels ?? {}).length > 0 ? (
                      <div className="muted">claims {labels(w.claimedLabels)}</div>
                    ) : null}
                  </td>
                  <td className="mono">{w.resources ? JSON.stringify(w.resources) : '—'}</td>
                  <td>
                    {w.runningAttempts} / {w.maxConcurrency}
                  </td>
                  <td className={w.heartbeatAgeMs > 30_000 ? 'failure' : ''}>
                    {duration(w.heartbeatAgeMs)} ago
                  </td>
                  {actOnPlatform ? (
                    <td>
                      <WorkerActions
                        workerId={w.id}
                        draining={w.runtimeState === 'DRAINING'}
                        cordoned={w.schedulingStatus === 'INELIGIBLE'}
                        onDone={reload}
                      />
                    </td>
                  ) : null}
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </div>
      <div className="panel">
        <h2>Steps waiting for a worker</h2>
        {data.queued.length === 0 ? (
          <p className="muted">Nothing is waiting.</p>
        ) : (
          <table>
            <thead>
              <tr>
                <th>Task</th>
                <th>Step</th>
                <th>Needs</th>
                <th>Why it is not placed</th>
              </tr>
            </thead>
            <tbody>
              {data.queued.map((q) => (
                <tr key={`${q.taskId}-${q.stepKey}`}>
                  <td>
                    <a href={`#/tasks/${q.taskId}`}>{q.taskName}</a>
                  </td>
                  <td>{q.stepKey}</td>
                  <td>{q.capability}</td>
                  <td>{q.reasons.length > 0 ? q.reasons.join('; ') : 'waiting for the scheduler'}</td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </div>
    </section>
  );
}

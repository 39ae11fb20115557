import { useEffect, useState } from 'react';
import { api } from '../api.ts';

interface ScheduleItem {
  id: string;
  applicationId: string;
  cron: string;
  timeZone: string;
  workflowName: string;
  workflowVersion: string;
  overlap: string;
  paused: boolean;
  nextFireTimes: string[];
  queuedFireAt: string | null;
  lastFireAt: string | null;
  lastTaskId: string | null;
  lastError: string | null;
}

/** Every application's schedules with their next fire times. */
export function Schedules() {
  const [items, setItems] = useState<ScheduleItem[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    api<{ items: ScheduleItem[] }>('/schedules').then(
      (d) => setItems(d.items),
      (e: Error) => setError(e.message),
    );
  }, []);
  if (error) return <div className="panel error">Could not load the schedules: {error}</div>;
  if (!items) return <p className="loading">Loading schedules…</p>;
  if (items.length === 0) return <p className="muted">No schedule yet.</p>;
  return (
    <section className="panel">
      <table>
        <thead>
          <tr>
            <th>Workflow</th>
            <th>Cron</th>
            <th>Overlap</th>
            <th>State</th>
            <th>Next fire times</th>
            <th>Last fire</th>
          </tr>
        </thead>
        <tbody>
          {items.map((s) => (
            <tr key={s.id} data-schedule={s.id}>
              <td>
                {s.workflowName} <span className="muted">v{s.workflowVersion}</span>
              </td>
              <td>
                <code>{s.cron}</code> <span className="muted">{s.timeZone}</span>
              </td>
              <td>{s.overlap}</td>
              <td data-field="state">
                {s.paused ? 'paused' : s.queuedFireAt ? 'one fire queued' : 'active'}
              </td>
              <td data-field="next">
                {s.nextFireTimes.map((t) => (
                  <div key={t}>{new Date(t).toISOString()}</div>
                ))}
              </td>
              <td>
                {s.lastTaskId ? (
                  <a href={`#/tasks/${s.lastTaskId}`}>{s.lastFireAt}</a>
                ) : (
                  (s.lastFireAt ?? '—')
                )}
                {s.lastError ? <div className="muted">{s.lastError}</div> : null}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </section>
  );
}

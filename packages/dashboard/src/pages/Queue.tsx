/**
 * The queue page (docs/scheduling.md): fair share as it is now and lately, read every 3 s. Per tenant
 * and application: steps waiting and running, the weight and the share of placements over the window
 * (and an application's tasks-in-flight quota);
 * per concurrency key: its limit, whether paused, running and waiting steps; and a chart of the steps
 * placed per minute by tenant. Operators change limits, pauses and weights with a reason (audited).
 */
import { useState } from 'react';
import { usePolled } from '../api.ts';
import { ShareChart, type ShareSeries } from '../charts/ShareChart.tsx';
import { useCan } from '../session.ts';
import { KeyControls, type KeyView, WeightControls } from './QueueControls.tsx';

interface Line {
  id: string;
  name: string;
  weight: number;
  waiting: number;
  running: number;
  placed: number;
  share: number | null;
}

interface ApplicationLine extends Line {
  /** Its own limit of unfinished tasks; null: the platform setting. */
  tasksInFlightQuota: number | null;
}

interface TenantLine extends Line {
  applications: ApplicationLine[];
  keys: KeyView[];
}

interface QueueOverview {
  minutes: number;
  tenants: TenantLine[];
  chart: ShareSeries;
}

const windows = [15, 30, 60] as const;
const percent = (share: number | null) => (share === null ? '—' : `${Math.round(share * 100)}%`);

function KeyRow({ tenantId, keyView, onDone }: { tenantId: string; keyView: KeyView; onDone: () => void }) {
  const can = useCan();
  const effective = keyView.limit ?? keyView.declaredLimit;
  return (
    <tr data-key={keyView.name}>
      <td>
        <code>{keyView.name}</code>
      </td>
      <td data-field="limit">
        {effective ?? '—'}
        <span className="muted">
          {keyView.limit === null ? ' declared' : ` set (declared ${keyView.declaredLimit ?? '—'})`}
        </span>
      </td>
      <td data-field="running">{keyView.running}</td>
      <td data-field="waiting">{keyView.waiting}</td>
      <td data-field="state">{keyView.paused ? 'paused' : 'active'}</td>
      {can.act ? (
        <td>
          <KeyControls tenantId={tenantId} keyView={keyView} onDone={onDone} />
        </td>
      ) : null}
    </tr>
  );
}

function TenantPanel({ tenant, onDone }: { tenant: TenantLine; onDone: () => void }) {
  const can = useCan();
  return (
    <section className="panel" data-tenant={tenant.id}>
      <h3>{tenant.name}</h3>
      <p data-field="tenant-counts">
        waiting <strong data-field="waiting">{tenant.waiting}</strong> · running{' '}
        <strong data-field="running">{tenant.running}</strong> · weight{' '}
        <strong data-field="weight">{tenant.weight}</strong> · share{' '}
        <strong data-field="share">{percent(tenant.share)}</strong>
      </p>
      {can.actOnPlatform ? (
        <WeightControls scope="tenants" id={tenant.id} weight={tenant.weight} onDone={onDone} />
      ) : null}
      <table>
        <thead>
          <tr>
            <th>Application</th>
            <th>Waiting</th>
            <th>Running</th>
            <th>Placed</th>
            <th>Share</th>
            <th>Weight</th>
            <th>Tasks in flight quota</th>
            {can.act ? <th>Change</th> : null}
          </tr>
        </thead>
        <tbody>
          {tenant.applications.map((application) => (
            <tr key={application.id} data-application={application.id}>
              <td>{application.name}</td>
              <td data-field="waiting">{application.waiting}</td>
              <td data-field="running">{application.running}</td>
              <td data-field="placed">{application.placed}</td>
              <td data-field="share">{percent(application.share)}</td>
              <td data-field="weight">{application.weight}</td>
              <td data-field="quota">
                {application.tasksInFlightQuota ?? <span className="muted">platform setting</span>}
              </td>
              {can.act ? (
                <td>
                  <WeightControls
                    scope="applications"
                    id={application.id}
                    weight={application.weight}
                    onDone={onDone}
                  />
                </td>
              ) : null}
            </tr>
          ))}
        </tbody>
      </table>
      {tenant.keys.length > 0 ? (
        <table data-keys>
          <thead>
            <tr>
              <th>Concurrency key</th>
              <th>Limit</th>
              <th>Running</th>
              <th>Waiting</th>
              <th>State</th>
              {can.act ? <th>Change</th> : null}
            </tr>
          </thead>
          <tbody>
            {tenant.keys.map((key) => (
              <KeyRow key={key.name} tenantId={tenant.id} keyView={key} onDone={onDone} />
            ))}
          </tbody>
        </table>
      ) : (
        <p className="muted">No concurrency key declared.</p>
      )}
    </section>
  );
}

export function Queue() {
  const [minutes, setMinutes] = useState<number>(30);
  const { data, error, reload } = usePolled<QueueOverview>(`/queue?minutes=${minutes}`, 3_000);
  return (
    <section className="queue">
      <div className="filters chart-toolbar">
        <h2>Fair share over the last {minutes} minutes</h2>
        {windows.map((option) => (
          <button
            key={option}
            type="button"
            className={option === minutes ? 'active' : ''}
            aria-pressed={option === minutes}
            onClick={() => setMinutes(option)}
          >
            {option} min
          </button>
        ))}
        {error ? <span className="muted">could not refresh: {error}</span> : null}
      </div>
      {!data ? (
        <p className="loading">Loading…</p>
      ) : (
        <>
          <ShareChart data={data.chart} />
          {data.tenants.length === 0 ? <p className="muted">No tenant to show.</p> : null}
          {data.tenants.map((tenant) => (
            <TenantPanel key={tenant.id} tenant={tenant} onDone={reload} />
          ))}
        </>
      )}
    </section>
  );
}

/**
 * The queue page's operator controls, each with a reason (audited): a concurrency key's limit (or back
 * to the declared one), pause and resume; a tenant's or an application's fair-share weight.
 */
import { useState } from 'react';
import { api } from '../api.ts';
import { useReasonedAction } from './useReasonedAction.ts';

export interface KeyView {
  name: string;
  limit: number | null;
  declaredLimit: number | null;
  paused: boolean;
  running: number;
  waiting: number;
}

function ReasonField({ value, onChange }: { value: string; onChange: (value: string) => void }) {
  return (
    <input
      name="reason"
      placeholder="Reason (required)"
      value={value}
      maxLength={2000}
      onChange={(event) => onChange(event.target.value)}
    />
  );
}

export function KeyControls({
  tenantId,
  keyView,
  onDone,
}: {
  tenantId: string;
  keyView: KeyView;
  onDone: () => void;
}) {
  const { reason, setReason, busy, error, blank, run } = useReasonedAction();
  const [limit, setLimit] = useState(String(keyView.limit ?? keyView.declaredLimit ?? 1));
  const change = (body: { limit?: number | null; paused?: boolean }) =>
    run(async (given) => {
      await api(`/queue/tenants/${tenantId}/keys/${encodeURIComponent(keyView.name)}`, {
        method: 'PUT',
        body: { ...body, reason: given },
      });
      onDone();
    });
  const wanted = Number(limit);
  const validLimit = Number.isInteger(wanted) && wanted >= 1;
  return (
    <div className="worker-actions">
      <input
        name="limit"
        type="number"
        min={1}
        step={1}
        aria-label="New limit"
        value={limit}
        onChange={(event) => setLimit(event.target.value)}
      />
      <ReasonField value={reason} onChange={setReason} />
      <button
        type="button"
        data-action="limit"
        disabled={busy || blank || !validLimit}
        onClick={() => void change({ limit: wanted })}
      >
        Set limit
      </button>
      {keyView.limit !== null && keyView.declaredLimit !== null ? (
        <button
          type="button"
          data-action="declared"
          disabled={busy || blank}
          onClick={() => void change({ limit: null })}
        >
          Declared limit
        </button>
      ) : null}
      <button
        type="button"
        data-action={keyView.paused ? 'resume' : 'pause'}
        disabled={busy || blank}
        onClick={() => void change({ paused: !keyView.paused })}
      >
        {keyView.paused ? 'Resume' : 'Pause'}
      </button>
      {error ? <div className="failure">{error}</div> : null}
    </div>
  );
}

export function WeightControls({
  scope,
  id,
  weight,
  onDone,
}: {
  scope: 'tenants' | 'applications';
  id: string;
  weight: number;
  onDone: () => void;
}) {
  const { reason, setReason, busy, error, blank, run } = useReasonedAction();
  const [value, setValue] = useState(String(weight));
  const wanted = Number(value);
  const valid = Number.isFinite(wanted) && wanted > 0 && wanted <= 1000;
  const save = () =>
    run(async (given) => {
      await api(`/queue/${scope}/${id}/weight`, { method: 'PUT', body: { weight: wanted, reason: given } });
      onDone();
    });
  return (
    <div className="worker-actions">
      <input
        name="weight"
        type="number"
        min={0.01}
        max={1000}
        step="any"
        aria-label="New weight"
        value={value}
        onChange={(event) => setValue(event.target.value)}
      />
      <ReasonField value={reason} onChange={setReason} />
      <button
        type="button"
        data-action="weight"
        disabled={busy || blank || !valid}
        onClick={() => void save()}
      >
        Set weight
      </button>
      {error ? <div className="failure">{error}</div> : null}
    </div>
  );
}

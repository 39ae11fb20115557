/**
 * The operator's actions on one worker session, with a reason (audited): Drain (it finishes its running
 * attempts, takes nothing new and exits) and Cordon / Uncordon (placed on no more; its work goes on).
 */
import { useState } from 'react';
import { api } from '../api.ts';

export function WorkerActions({
  workerId,
  draining,
  cordoned,
  onDone,
}: {
  workerId: string;
  draining: boolean;
  cordoned: boolean;
  onDone: () => void;
}) {
  const [reason, setReason] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const act = async (action: 'drain' | 'cordon' | 'uncordon') => {
    setBusy(true);
    setError(null);
    try {
      await api(`/workers/${workerId}/${action}`, { method: 'POST', body: { reason: reason.trim() } });
      setReason('');
      onDone();
    } catch (failure) {
      setError((failure as Error).message);
    } finally {
      setBusy(false);
    }
  };
  const blank = reason.trim() === '';
  return (
    <div className="worker-actions">
      <input
        name="reason"
        placeholder="Reason (required)"
        value={reason}
        maxLength={2000}
        onChange={(event) => setReason(event.target.value)}
      />
      <button
        type="button"
        data-action="drain"
        disabled={busy || blank || draining}
        onClick={() => act('drain')}
      >
        Drain
      </button>
      <button
        type="button"
        data-action={cordoned ? 'uncordon' : 'cordon'}
        disabled={busy || blank}
        onClick={() => act(cordoned ? 'uncordon' : 'cordon')}
      >
        {cordoned ? 'Uncordon' : 'Cordon'}
      </button>
      {error ? <div className="error">{error}</div> : null}
    </div>
  );
}

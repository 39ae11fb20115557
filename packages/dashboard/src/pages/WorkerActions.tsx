/**
 * The operator's actions on one worker session, with a reason (audited): Drain (it finishes its running
 * attempts, takes nothing new and exits) and Cordon / Uncordon (placed on no more; its work goes on).
 */
import { api } from '../api.ts';
import { useReasonedAction } from './useReasonedAction.ts';

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
  const { reason, setReason, busy, error, blank, run } = useReasonedAction();
  const act = (action: 'drain' | 'cordon' | 'uncordon') =>
    run(async (given) => {
      await api(`/workers/${workerId}/${action}`, { method: 'POST', body: { reason: given } });
      onDone();
    });
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
        onClick={() => void act('drain')}
      >
        Drain
      </button>
      <button
        type="button"
        data-action={cordoned ? 'uncordon' : 'cordon'}
        disabled={busy || blank}
        onClick={() => void act(cordoned ? 'uncordon' : 'cordon')}
      >
        {cordoned ? 'Uncordon' : 'Cordon'}
      </button>
      {error ? <div className="failure">{error}</div> : null}
    </div>
  );
}

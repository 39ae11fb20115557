/**
 * A waiting approval step on the task page: who can act, the decisions so far, and the operator's
 * Approve / Reject with a reason (kept with the decision and shown in the timeline), for operators whose
 * role lets them act on tasks.
 */
import { useState } from 'react';
import { type ApprovalWaiting, api } from '../api.ts';
import { useCan } from '../session.ts';

const list = (label: string, names: string[] | undefined) =>
  names && names.length > 0 ? `${label} ${names.join(', ')}` : null;

export function whoCanAct(waiting: ApprovalWaiting): string {
  const { approvers } = waiting;
  const parts = [
    approvers.owner ? 'the owner' : null,
    list('users', approvers.users),
    list('roles', approvers.roles),
    list('projects', approvers.projects),
  ].filter((p): p is string => p !== null);
  return parts.length > 0 ? parts.join(' · ') : 'the operator';
}

export function ApprovalActions({
  taskId,
  stepKey,
  waiting,
  onDecided,
}: {
  taskId: string;
  stepKey: string;
  waiting: ApprovalWaiting;
  onDecided: () => void;
}) {
  const { act } = useCan();
  const [reason, setReason] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const approvals = waiting.decisions.filter((d) => d.decision === 'APPROVE').length;
  const decide = async (decision: 'approve' | 'reject') => {
    setBusy(true);
    setError(null);
    try {
      await api(`/tasks/${taskId}/steps/${encodeURIComponent(stepKey)}/${decision}`, {
        method: 'POST',
        body: { reason: reason.trim(), idempotencyKey: crypto.randomUUID() },
      });
      onDecided();
    } catch (failure) {
      setError((failure as Error).message);
    } finally {
      setBusy(false);
    }
  };
  return (
    <div className="approval" data-approval={stepKey}>
      <div>
        Waiting for approval ({approvals} of {waiting.required}) by{' '}
        <span data-who-can-act>{whoCanAct(waiting)}</span>
        {waiting.timeoutAt ? (
          <span className="muted"> · until {new Date(waiting.timeoutAt).toLocaleString()}</span>
        ) : null}
      </div>
      {waiting.decisions.map((d) => (
        <div key={d.decidedBy} className="muted">
          {d.decidedBy}: {d.decision}
          {d.comment ? ` — ${d.comment}` : ''}
        </div>
      ))}
      {act ? (
        <>
          <input
            aria-label="Reason"
            placeholder="Reason (required)"
            value={reason}
            onChange={(event) => setReason(event.target.value)}
          />
          <button
            type="button"
            disabled={busy || reason.trim() === ''}
            onClick={() => void decide('approve')}
          >
            Approve
          </button>
          <button type="button" disabled={busy || reason.trim() === ''} onClick={() => void decide('reject')}>
            Reject
          </button>
        </>
      ) : null}
      {error ? <div className="failure">{error}</div> : null}
    </div>
  );
}

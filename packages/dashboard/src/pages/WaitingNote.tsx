/**
 * What a running sleep, signal, map or child-task step waits for, on the task page; for a signal, the
 * operator whose role lets them act on tasks can send it (a JSON payload and a reason, kept with the fact
 * and shown in the timeline).
 */
import { useState } from 'react';
import { api } from '../api.ts';
import { useCan } from '../session.ts';

type Waiting = { kind: string } & Record<string, unknown>;

const at = (value: unknown) => (typeof value === 'string' ? new Date(value).toLocaleString() : '—');

/** One line for people: what the step waits for. */
export function waitingSentence(waiting: Waiting): string {
  switch (waiting.kind) {
    case 'sleep':
      return `Sleeping until ${at(waiting.until)}`;
    case 'signal':
      return `Waiting for the signal ${String(waiting.name)}${waiting.timeoutAt ? ` until ${at(waiting.timeoutAt)}` : ''}`;
    case 'task':
      return waiting.childTaskId
        ? `Waiting for child task ${String(waiting.childTaskId)}`
        : 'Starting a child task';
    case 'map':
      return `${Number(waiting.succeeded) + Number(waiting.failed)} of ${String(waiting.total)} items done (${String(waiting.running)} running, ${String(waiting.failed)} failed)`;
    default:
      return `Waiting (${waiting.kind})`;
  }
}

export function WaitingNote({
  taskId,
  waiting,
  onSent,
}: {
  taskId: string;
  waiting: Waiting;
  onSent: () => void;
}) {
  const { act } = useCan();
  return (
    <div className="waiting" data-waiting={waiting.kind}>
      <div>{waitingSentence(waiting)}</div>
      {waiting.kind === 'task' && typeof waiting.childTaskId === 'string' ? (
        <a href={`#/tasks/${waiting.childTaskId}`}>Open the child task</a>
      ) : null}
      {waiting.kind === 'signal' && act ? (
        <SignalForm taskId={taskId} name={String(waiting.name)} onSent={onSent} />
      ) : null}
    </div>
  );
}

function SignalForm({ taskId, name, onSent }: { taskId: string; name: string; onSent: () => void }) {
  const [payload, setPayload] = useState('{}');
  const [reason, setReason] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const send = async () => {
    let parsed: unknown;
    try {
      parsed = JSON.parse(payload);
    } catch {
      setError('The payload is not valid JSON');
      return;
    }
    setBusy(true);
    setError(null);
    try {
      await api(`/tasks/${taskId}/signals/${encodeURIComponent(name)}`, {
        method: 'POST',
        body: { payload: parsed, reason: reason.trim(), idempotencyKey: crypto.randomUUID() },
      });
      onSent();
    } catch (failure) {
      setError((failure as Error).message);
    } finally {
      setBusy(false);
    }
  };
  return (
    <div className="signal-form">
      <textarea
        aria-label="Payload"
        rows={2}
        value={payload}
        onChange={(event) => setPayload(event.target.value)}
      />
      <input
        aria-label="Reason"
        placeholder="Reason (required)"
        value={reason}
        onChange={(event) => setReason(event.target.value)}
      />
      <button type="button" disabled={busy || reason.trim() === ''} onClick={() => void send()}>
        Send {name}
      </button>
      {error ? <div className="failure">{error}</div> : null}
    </div>
  );
}

import { useState } from 'react';

/**
 * An operator action that takes a reason: the reason field's value, whether the call is on its way, and
 * its failure for people. `run` calls the action with the trimmed reason and clears the field after.
 */
export function useReasonedAction() {
  const [reason, setReason] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const run = async (action: (reason: string) => Promise<void>) => {
    setBusy(true);
    setError(null);
    try {
      await action(reason.trim());
      setReason('');
    } catch (failure) {
      setError((failure as Error).message);
    } finally {
      setBusy(false);
    }
  };
  return { reason, setReason, busy, error, blank: reason.trim() === '', run };
}

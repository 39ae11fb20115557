/**
 * A callback delivery's status as the API and the dashboard show it, named for what it means to the
 * receiver (docs/callbacks.md). The table keeps the outbox words every claimable queue shares (PENDING,
 * PUBLISHING, PUBLISHED, FAILED, DEAD: one claim/retry machinery for the outbox, realtime, timers,
 * notifications and callbacks), so the words are mapped here, at the boundary, not in storage.
 */
export type CallbackDeliveryStatus = 'PENDING' | 'SENDING' | 'DELIVERED' | 'RETRYING' | 'DEAD';

const shown: Readonly<Record<string, CallbackDeliveryStatus>> = {
  PENDING: 'PENDING', // not tried yet (or put back by a redeliver)
  PUBLISHING: 'SENDING', // being sent now
  PUBLISHED: 'DELIVERED', // the receiver answered 2xx
  FAILED: 'RETRYING', // an attempt failed; it will be sent again after a back-off
  DEAD: 'DEAD', // given up: a permanent refusal or the attempt limit; only a redeliver sends it again
};

export function callbackDeliveryStatus(stored: string): CallbackDeliveryStatus {
  const status = shown[stored];
  if (!status) throw new Error(`unknown callback delivery status ${stored}`);
  return status;
}

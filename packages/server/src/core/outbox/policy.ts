/**
 * The one retry policy of every outbox-like table (domain events, realtime rows, callbacks, timers):
 * a claim holds a row for a lease; a failure waits 2^attempts seconds (capped at 1,024 s); after the
 * 20th failed attempt the row is DEAD and needs a person.
 */
export const claimPolicy = {
  leaseMs: 60_000,
  maxAttempts: 20,
  maxBackoffSeconds: 1_024,
} as const;

export type ClaimPolicy = typeof claimPolicy;

export function backoffSeconds(attempts: number, policy: ClaimPolicy = claimPolicy): number {
  return Math.min(2 ** attempts, policy.maxBackoffSeconds);
}

/** What a failed attempt leaves behind: retry later, or give up. `attempts` counts this attempt. */
export function afterFailure(
  attempts: number,
  now: Date,
  policy: ClaimPolicy = claimPolicy,
): { status: 'FAILED'; availableAt: Date } | { status: 'DEAD' } {
  if (attempts >= policy.maxAttempts) return { status: 'DEAD' };
  return { status: 'FAILED', availableAt: new Date(now.getTime() + backoffSeconds(attempts, policy) * 1000) };
}

/**
 * The one retry policy of every outbox-like table (domain events, realtime rows, callbacks, timers):
 * a claim holds a row for a lease; a failure waits 2^attempts seconds (capped at 1,024 s); after the
 * 20th failed attempt the row is DEAD and needs a person.
 */
export interface ClaimPolicy {
  leaseMs: number;
  maxAttempts: number;
  maxBackoffSeconds: number;
  /** Each wait is spread by up to ± this fraction, so rows that failed together do not retry together. */
  jitter?: number;
}

export const claimPolicy: ClaimPolicy = {
  leaseMs: 60_000,
  maxAttempts: 20,
  maxBackoffSeconds: 1_024,
};

/** Live status is worth little late: waits of at most 30 s, spread out; DEAD after 20 failures. */
export const realtimeClaimPolicy: ClaimPolicy = {
  leaseMs: 30_000,
  maxAttempts: 20,
  maxBackoffSeconds: 30,
  jitter: 0.5,
};

export function backoffSeconds(attempts: number, policy: ClaimPolicy = claimPolicy): number {
  return Math.min(2 ** attempts, policy.maxBackoffSeconds);
}

/** What a failed attempt leaves behind: retry later, or give up. `attempts` counts this attempt. */
export function afterFailure(
  attempts: number,
  now: Date,
  policy: ClaimPolicy = claimPolicy,
  random: () => number = Math.random,
): { status: 'FAILED'; availableAt: Date } | { status: 'DEAD' } {
  if (attempts >= policy.maxAttempts) return { status: 'DEAD' };
  const spread = policy.jitter ? 1 + policy.jitter * (2 * random() - 1) : 1;
  const waitMs = Math.round(backoffSeconds(attempts, policy) * 1000 * spread);
  return { status: 'FAILED', availableAt: new Date(now.getTime() + waitMs) };
}

/**
 * Token buckets keyed by name, in memory, on an injected clock. A bucket holds up to `burst` tokens and
 * gains `perSecond` of them each second; a request takes one. A full bucket is the same as no bucket,
 * so buckets that have refilled are the ones dropped when the map is full.
 */
import type { Clock } from './ports.ts';

export interface BucketPolicy {
  /** Tokens added per second; 0 switches the limit off. */
  perSecond: number;
  /** The most tokens a bucket holds: the largest burst let through at once. */
  burst: number;
}

interface Bucket {
  tokens: number;
  updatedAt: number;
}

export type Take = { allowed: true } | { allowed: false; retryAfterMs: number };

/** The bucket's level at `now`: what it had plus what the elapsed time added, capped at `burst`. */
export function refilled(bucket: Bucket, policy: BucketPolicy, now: number): number {
  const elapsedSeconds = Math.max(0, now - bucket.updatedAt) / 1000;
  return Math.min(policy.burst, bucket.tokens + elapsedSeconds * policy.perSecond);
}

export class TokenBuckets {
  private readonly buckets = new Map<string, Bucket>();

  constructor(
    private readonly clock: Clock,
    private readonly policy: BucketPolicy,
    private readonly maxBuckets = 100_000,
  ) {}

  /** Takes one token from `key`'s bucket, or says how long until one is there (taking nothing). */
  take(key: string): Take {
    if (this.policy.perSecond <= 0) return { allowed: true };
    const now = this.clock.now().getTime();
    const bucket = this.buckets.get(key);
    const tokens = bucket ? refilled(bucket, this.policy, now) : this.policy.burst;
    if (tokens < 1) {
      return { allowed: false, retryAfterMs: ((1 - tokens) / this.policy.perSecond) * 1000 };
    }
    if (!bucket && this.buckets.size >= this.maxBuckets) this.dropFull(now);
    this.buckets.set(key, { tokens: tokens - 1, updatedAt: now });
    return { allowed: true };
  }

  get size(): number {
    return this.buckets.size;
  }

  /** Forgets the buckets that have refilled (nothing is lost); if none has, all of them. */
  private dropFull(now: number): void {
    for (const [key, bucket] of this.buckets) {
      if (refilled(bucket, this.policy, now) >= this.policy.burst) this.buckets.delete(key);
    }
    if (this.buckets.size >= this.maxBuckets) this.buckets.clear();
  }
}

import { type Static, Type } from 'typebox';

/**
 * An access grant as TDP returns it to a worker (docs/resource-provider.md): where and how to send the
 * bytes, until when, and the resource it is for (for an artifact, the new resource's reference).
 */
export const AccessGrant = Type.Object({
  grantId: Type.String(),
  purpose: Type.Union([Type.Literal('DOWNLOAD'), Type.Literal('UPLOAD'), Type.Literal('ARTIFACT')]),
  url: Type.String(),
  method: Type.Union([Type.Literal('GET'), Type.Literal('PUT')]),
  headers: Type.Record(Type.String(), Type.String()),
  expiresAt: Type.String(),
  maxBytes: Type.Union([Type.Integer(), Type.Null()]),
  resourceRef: Type.String(),
});
export type AccessGrant = Static<typeof AccessGrant>;

/**
 * When to renew a grant (the worker's `grantRenewal` option, the server's `grantReplayRenewal` setting):
 * once less than `remainingFraction` of its lifetime, or less than `remainingMs`, is left.
 */
export interface GrantRenewalPolicy {
  remainingFraction: number;
  remainingMs: number;
}

/**
 * The moment (ms since the epoch) from which a grant issued at `issuedAtMs` is due for renewal: never
 * before half its lifetime, so that a grant shorter than `remainingMs` is not renewed over and over.
 */
export function grantRenewalDueAt(
  issuedAtMs: number,
  expiresAtMs: number,
  policy: GrantRenewalPolicy,
): number {
  const lifetime = Math.max(0, expiresAtMs - issuedAtMs);
  const before = Math.max(policy.remainingMs, lifetime * policy.remainingFraction);
  return expiresAtMs - Math.min(before, lifetime / 2);
}

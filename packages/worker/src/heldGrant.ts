/**
 * A grant an attempt still needs, kept valid for as long as it is held: before it
 * expires (`grantRenewal`), it is renewed with a request of its own, and the transfer that uses it
 * takes the renewed URL. It is released when its transfer is done or the attempt ends.
 */
import { type GrantRenewalPolicy, grantRenewalDueAt } from '@tdp/protocol';
import type { Grant } from './client.ts';

export interface HeldGrant {
  /** The newest grant (renewed in the background while held). */
  current(): Grant;
  /** The newest grant, renewed now if it is due (a timer that could not fire in time: a suspended process). */
  fresh(): Promise<Grant>;
  /** Stops renewing it. */
  release(): void;
}

export interface HoldDeps {
  policy: GrantRenewalPolicy;
  /** Asks TDP for the renewal numbered `n` of the grant (its idempotency key follows from it). */
  renew(grant: Grant, n: number): Promise<Grant>;
  /** A renewal that failed in the background; it is tried again until the grant expires. */
  failed(error: unknown): void;
  /** After a failed background renewal, the next try waits this long (or until the grant expires). */
  retryMs: number;
}

export function holdGrant(first: Grant, deps: HoldDeps): HeldGrant {
  let grant = first;
  let receivedAt = Date.now();
  let renewals = 0;
  let released = false;
  let timer: NodeJS.Timeout | undefined;
  let inFlight: Promise<Grant> | null = null;

  const expiresAt = () => new Date(grant.expiresAt).getTime();
  // Lifetime counts from when this worker got the grant: its own clock, not the provider's.
  const dueAt = () => grantRenewalDueAt(receivedAt, expiresAt(), deps.policy);

  const renewNow = (): Promise<Grant> => {
    inFlight ??= (async () => {
      try {
        renewals += 1;
        grant = await deps.renew(grant, renewals);
        receivedAt = Date.now();
        return grant;
      } finally {
        inFlight = null;
      }
    })();
    return inFlight;
  };

  const schedule = (delayMs: number) => {
    if (released) return;
    clearTimeout(timer);
    timer = setTimeout(
      () => {
        // Renewed meanwhile (by `fresh`): wait for the new grant's turn.
        if (Date.now() < dueAt()) return schedule(dueAt() - Date.now());
        renewNow().then(
          () => schedule(dueAt() - Date.now()),
          (error) => {
            deps.failed(error);
            // Expired: the next use renews it (`fresh`) or fails with the reason.
            const left = expiresAt() - Date.now();
            if (left > 0) schedule(Math.min(deps.retryMs, left));
          },
        );
      },
      Math.max(0, delayMs),
    );
    // A held grant never keeps the process alive by itself.
    timer.unref();
  };
  schedule(dueAt() - Date.now());

  return {
    current: () => grant,
    fresh: async () => (inFlight ? inFlight : Date.now() >= dueAt() ? renewNow() : grant),
    release: () => {
      released = true;
      clearTimeout(timer);
    },
  };
}

/** The gateway the slow-consumer tests run: a small queue, long history, and counts of what it did. */
import { Gateway } from '../src/index.ts';

export const slowTestSecret = 'test-secret-of-enough-length-for-hs256';

export function slowConsumerGateway() {
  const seen = { coalesced: 0, slowDisconnects: 0 };
  const gateway = new Gateway({
    hmacKey: slowTestSecret,
    // Enough history for a client cut off as slow to recover everything it missed.
    history: () => ({ size: 20_000, ttlMs: 600_000 }),
    // Long enough for the paused client to read up to the close once it resumes.
    clientQueue: { pressureBytes: 16 * 1024, maxBytes: 512 * 1024, closeGraceMs: 30_000 },
    observer: {
      coalesced: () => {
        seen.coalesced += 1;
      },
      slowDisconnect: () => {
        seen.slowDisconnects += 1;
      },
    },
  });
  return { gateway, seen };
}

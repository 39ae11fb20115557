/** How long a worker waits before trying TDP's server again after a refusal or no answer (loops.ts). */
import { describe, expect, it } from 'vitest';
import { backoffMs, serverRetryMs } from '../src/loops.ts';

describe('serverRetryMs', () => {
  it('grows from half a second to 5 s at most, so finished work reaches a server back from an outage soon', () => {
    expect(serverRetryMs(1, () => 0)).toBe(500);
    expect(serverRetryMs(1, () => 1)).toBe(1_000);
    expect(serverRetryMs(3, () => 1)).toBe(4_000);
    // Six refusals in a row (a database restart of a minute): 30 s with the general back-off.
    for (const failures of [4, 6, 20]) {
      expect(serverRetryMs(failures, () => 1)).toBe(5_000);
      expect(serverRetryMs(failures, () => 0)).toBe(2_500);
    }
    expect(backoffMs(6, () => 1)).toBe(30_000);
  });
});

import { describe, expect, it } from 'vitest';
import { CapacityWakeup } from '../src/features/workers/capacityWakeup.ts';

function wakeup(retryDeferred: () => Promise<number>) {
  const woken: number[] = [];
  const errors: unknown[] = [];
  const capacity = new CapacityWakeup(
    retryDeferred,
    () => woken.push(1),
    0,
    (error) => errors.push(error),
  );
  return { capacity, woken, errors };
}

describe('the freed-capacity wake-up', () => {
  it('counts every freeing in its generation, also those coalesced into one round', async () => {
    const { capacity } = wakeup(async () => 0);
    const before = capacity.generation;
    for (let i = 0; i < 3; i++) capacity.freed();
    expect(capacity.generation).toBe(before + 3);
    await capacity.stop();
  });

  it('coalesces a burst into one round in flight and one queued', async () => {
    let calls = 0;
    let release: () => void = () => {};
    const { capacity, woken } = wakeup(async () => {
      calls += 1;
      await new Promise<void>((resolve) => {
        release = resolve;
      });
      return 1;
    });
    for (let i = 0; i < 10; i++) capacity.freed();
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(calls).toBe(1);
    release();
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(calls).toBe(2);
    release();
    await capacity.stop();
    expect(woken).toHaveLength(2);
  });

  it('starts no round once stopped, and stop waits for the round in flight', async () => {
    let calls = 0;
    let finished = false;
    const { capacity, errors } = wakeup(async () => {
      calls += 1;
      await new Promise((resolve) => setTimeout(resolve, 30));
      finished = true;
      return 0;
    });
    capacity.freed();
    await new Promise((resolve) => setTimeout(resolve, 5));
    capacity.freed(); // queued behind the round in flight
    await capacity.stop();
    expect(finished).toBe(true);
    capacity.freed();
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(calls).toBe(1);
    expect(errors).toEqual([]);
  });

  it('a stop before the round is due cancels it', async () => {
    let calls = 0;
    const { capacity } = wakeup(async () => {
      calls += 1;
      return 0;
    });
    capacity.freed();
    await capacity.stop();
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(calls).toBe(0);
  });
});

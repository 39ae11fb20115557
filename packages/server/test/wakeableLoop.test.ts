import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { WakeableLoop } from '../src/host/loops/wakeableLoop.ts';

const idleLoop = () => {
  let rounds = 0;
  const loop = new WakeableLoop({
    name: 'test',
    logger: pino({ level: 'silent' }),
    now: () => new Date(),
    // Nothing is ever due and the safety-net poll is far away: only a wake-up can start a round.
    maxIdleMs: 60_000,
    nextDueAt: async () => null,
    round: async () => {
      rounds += 1;
      return { full: false };
    },
  });
  return { loop, rounds: () => rounds };
};

describe('WakeableLoop', () => {
  let stop: () => Promise<void> = async () => {};
  afterEach(() => stop());

  it('runs a round at once on wake()', async () => {
    const { loop, rounds } = idleLoop();
    loop.start();
    stop = () => loop.stop();
    await expect.poll(rounds).toBe(1);
    loop.wake();
    await expect.poll(rounds).toBe(2);
  });

  it('wakeBy(due) shortens the sleep to the due time, without a round before it', async () => {
    const { loop, rounds } = idleLoop();
    loop.start();
    stop = () => loop.stop();
    await expect.poll(rounds).toBe(1);
    // Due in a minute: nothing to do now, so no round runs.
    loop.wakeBy(new Date(Date.now() + 60_000));
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(rounds()).toBe(1);
    // Due in 200 ms: the loop wakes for it, long before its 60 s idle limit.
    loop.wakeBy(new Date(Date.now() + 200));
    await expect.poll(rounds, { timeout: 5_000 }).toBe(2);
    // Already due: same as wake().
    loop.wakeBy(new Date(Date.now() - 1));
    await expect.poll(rounds).toBe(3);
  });
});

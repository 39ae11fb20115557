import { describe, expect, it } from 'vitest';
import type { EventDraft } from '../src/localStore.ts';
import { ProgressThrottle } from '../src/runtime.ts';

describe('ProgressThrottle', () => {
  const setup = () => {
    let now = 0;
    const written: EventDraft[] = [];
    const throttle = new ProgressThrottle(
      1_000,
      (d) => written.push(d),
      () => now,
    );
    return { throttle, written, advance: (ms: number) => (now += ms) };
  };
  const percents = (written: EventDraft[]) => written.map((d) => (d.progress as { percent: number }).percent);

  it('sends at most one report per interval, the newest held back until flushed', () => {
    const { throttle, written, advance } = setup();
    advance(5_000);
    throttle.report(10);
    throttle.report(20);
    throttle.report(30);
    expect(percents(written)).toEqual([10]);
    throttle.flush();
    expect(percents(written)).toEqual([10, 30]);
    throttle.flush();
    expect(percents(written)).toEqual([10, 30]);
    advance(1_000);
    throttle.report(40);
    expect(percents(written)).toEqual([10, 30, 40]);
  });

  it('a new phase goes out at once; progress never goes down', () => {
    const { throttle, written, advance } = setup();
    advance(5_000);
    throttle.report(50, { phase: 'scan' });
    throttle.report(20, { phase: 'write' });
    expect(written.map((d) => [d.phaseCode, (d.progress as { percent: number }).percent])).toEqual([
      ['scan', 50],
      ['write', 50],
    ]);
    throttle.report(150);
    throttle.flush();
    expect(percents(written).at(-1)).toBe(100);
  });
});

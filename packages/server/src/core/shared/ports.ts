/** Time comes from here so tests can move it; SQL receives "now" as a parameter instead of calling now(). */
export interface Clock {
  now(): Date;
  /**
   * A clock that can jump (a test's) calls `listener` after each jump, so that loops sleeping until a
   * due time re-plan their sleep. The system clock never jumps.
   */
  onJump?(listener: () => void): void;
}

export interface IdGenerator {
  newId(): string;
}

export const systemClock: Clock = { now: () => new Date() };

/** Time comes from here so tests can move it; SQL receives "now" as a parameter instead of calling now(). */
export interface Clock {
  now(): Date;
}

export interface IdGenerator {
  newId(): string;
}

export const systemClock: Clock = { now: () => new Date() };

/** Cron expressions in a time zone, read by croner (maintained, no dependencies, time zones via Intl). */
import { Cron } from 'croner';

export interface CronSpec {
  cron: string;
  timeZone: string;
  startAt: Date | null;
  endAt: Date | null;
}

/** Why the expression does not parse, or null when it does. */
export function cronProblem(cron: string): string | null {
  try {
    new Cron(cron, { paused: true });
    return null;
  } catch (error) {
    // croner prefixes its messages with its class name, which says nothing to the caller.
    return (error as Error).message.replace(/^CronPattern:\s*/, '');
  }
}

/** True when the time zone is one Intl (and so croner) knows. */
export function isKnownTimeZone(timeZone: string): boolean {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone });
    return true;
  } catch {
    return false;
  }
}

function cronOf(spec: CronSpec): Cron {
  return new Cron(spec.cron, {
    paused: true,
    timezone: spec.timeZone,
    ...(spec.startAt ? { startAt: spec.startAt } : {}),
    ...(spec.endAt ? { stopAt: spec.endAt } : {}),
  });
}

/** The first fire time strictly after `after`, or null when the schedule has ended. */
export function nextFireAfter(spec: CronSpec, after: Date): Date | null {
  return cronOf(spec).nextRun(after);
}

/** The next `count` fire times strictly after `after`. */
export function nextFiresAfter(spec: CronSpec, after: Date, count: number): Date[] {
  return cronOf(spec).nextRuns(count, after);
}

/** The latest fire time at or before `now` (within start/end), never earlier than `due` (a fire time). */
export function latestFireBy(spec: CronSpec, due: Date, now: Date): Date {
  const [latest] = cronOf(spec).previousRuns(1, new Date(now.getTime() + 1));
  return latest && latest.getTime() > due.getTime() ? latest : due;
}

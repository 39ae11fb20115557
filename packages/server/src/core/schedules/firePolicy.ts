/**
 * What a schedule does at a round of the schedule loop (pure). The rule (docs/schedules.md):
 * - Only the latest fire time at or before now counts; earlier ones missed during downtime are dropped.
 * - It is *late* when it is more than the misfire grace before now. A late fire is skipped under SKIP and
 *   fired once (the catch-up) under QUEUE_ONE and ALLOW.
 * - While the previous task runs: SKIP drops the fire, QUEUE_ONE keeps it as the one queued fire (a
 *   second one while one is queued is dropped), ALLOW starts it anyway.
 * - A queued fire starts as soon as the previous task has ended.
 */
import type { ScheduleOverlap } from '@tdp/protocol';

export interface FireSituation {
  overlap: ScheduleOverlap;
  /** The latest fire time due now, or null when none is. */
  due: Date | null;
  /** True when `due` is later than the misfire grace allows (the server was down or behind). */
  late: boolean;
  previousRunning: boolean;
  queuedFireAt: Date | null;
}

export interface FireDecision {
  /** Fire times to start a task for, in order. */
  start: Date[];
  /** The queued fire afterwards. */
  queuedFireAt: Date | null;
}

export function decideFires(s: FireSituation): FireDecision {
  const start: Date[] = [];
  let queuedFireAt = s.queuedFireAt;
  let running = s.previousRunning;
  if (queuedFireAt && !running) {
    start.push(queuedFireAt);
    queuedFireAt = null;
    running = true;
  }
  if (!s.due) return { start, queuedFireAt };
  if (s.overlap === 'ALLOW') return { start: [...start, s.due], queuedFireAt };
  if (s.overlap === 'SKIP') return { start: s.late || running ? start : [...start, s.due], queuedFireAt };
  // QUEUE_ONE
  if (!running) return { start: [...start, s.due], queuedFireAt };
  return { start, queuedFireAt: queuedFireAt ?? s.due };
}

/** What a fire substitutes into the schedule's input: `"$.schedule.fireTime"`, `"$.schedule.id"`. */
export interface FireContext {
  scheduleId: string;
  fireAt: Date;
}

/**
 * The input of a fire's task: the schedule's input with every string that is exactly
 * `$.schedule.fireTime` (the fire time, ISO 8601) or `$.schedule.id` replaced, at any depth.
 */
export function fireInput(template: unknown, context: FireContext): unknown {
  if (template === '$.schedule.fireTime') return context.fireAt.toISOString();
  if (template === '$.schedule.id') return context.scheduleId;
  if (Array.isArray(template)) return template.map((item) => fireInput(item, context));
  if (template !== null && typeof template === 'object')
    return Object.fromEntries(
      Object.entries(template).map(([key, value]) => [key, fireInput(value, context)]),
    );
  return template;
}

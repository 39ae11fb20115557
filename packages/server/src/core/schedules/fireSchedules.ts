/**
 * The schedule loop's round: holds the due schedules (one replica at a time), starts their tasks through
 * the `ScheduledTasks` port with the idempotency key `schedule:<id>:<fire time ISO>`, and advances them.
 * A restart between a task's create and the advance re-creates with the same key and gets the same task.
 */

import { AppError } from '../shared/errors.ts';
import type { Clock } from '../shared/ports.ts';
import { latestFireBy, nextFireAfter } from './cron.ts';
import { decideFires, fireInput } from './firePolicy.ts';
import type { ScheduleAdvance, ScheduledTasks, ScheduleRecord, ScheduleStore } from './ports.ts';

export interface FireDeps {
  schedules: ScheduleStore;
  tasks: ScheduledTasks;
  clock: Clock;
  /** A fire handled later than this after its time counts as missed (see firePolicy.ts). */
  misfireGraceMs: number;
}

export const scheduleTaskKey = (scheduleId: string, fireAt: Date) =>
  `schedule:${scheduleId}:${fireAt.toISOString()}`;

/** Fires what is due; returns how many schedules it held. */
export async function fireDueSchedules(deps: FireDeps, batch: number): Promise<number> {
  const now = deps.clock.now();
  return deps.schedules.withDue(now, batch, (schedule) => fireOne(deps, schedule, now));
}

async function fireOne(deps: FireDeps, schedule: ScheduleRecord, now: Date): Promise<ScheduleAdvance> {
  const dueNow = schedule.nextFireAt && schedule.nextFireAt.getTime() <= now.getTime();
  const due = dueNow ? latestFireBy(schedule, schedule.nextFireAt!, now) : null;
  const previousRunning = schedule.lastTaskId
    ? await deps.tasks.isRunning(schedule.applicationId, schedule.lastTaskId)
    : false;
  const decision = decideFires({
    overlap: schedule.overlap,
    due,
    late: due !== null && now.getTime() - due.getTime() > deps.misfireGraceMs,
    previousRunning,
    queuedFireAt: schedule.queuedFireAt,
  });
  const advance: ScheduleAdvance = {
    nextFireAt: dueNow ? nextFireAfter(schedule, now) : schedule.nextFireAt,
    queuedFireAt: decision.queuedFireAt,
    lastFireAt: schedule.lastFireAt,
    lastTaskId: schedule.lastTaskId,
    lastError: schedule.lastError,
  };
  for (const fireAt of decision.start) {
    try {
      const { taskId } = await deps.tasks.start(
        schedule,
        scheduleTaskKey(schedule.id, fireAt),
        fireAt,
        fireInput(schedule.input, { scheduleId: schedule.id, fireAt }),
      );
      Object.assign(advance, { lastFireAt: fireAt, lastTaskId: taskId, lastError: null });
    } catch (error) {
      // A refusal (the workflow is gone, its input schema changed) drops this fire and says why;
      // anything else (the database) fails the round, which rolls back and retries.
      if (!(error instanceof AppError)) throw error;
      Object.assign(advance, { lastFireAt: fireAt, lastError: `${error.code}: ${error.message}` });
    }
  }
  return advance;
}

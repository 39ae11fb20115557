/** Schedules: cron schedules that start tasks through the tasks feature's own create path. */
import { Type } from 'typebox';
import { registerScheduleRoutes } from '../../adapters/inbound/http/scheduleRoutes.ts';
import { PostgresScheduleStore } from '../../adapters/outbound/postgres/scheduleStore.ts';
import { type FireDeps, fireDueSchedules } from '../../core/schedules/fireSchedules.ts';
import type { ScheduleDeps } from '../../core/schedules/schedules.ts';
import { defineFeature } from '../../host/feature.ts';
import type { LoopPacing } from '../../host/loops/wakeableLoop.ts';
import { setting, settingsSlice } from '../../host/settings.ts';
import { scheduledTasks } from './scheduledTasks.ts';

declare module '../../host/provisions.ts' {
  interface Provisions {
    schedules: ScheduleDeps;
  }
}

const settings = settingsSlice(
  Type.Object({
    scheduleMisfireGraceMs: setting.value({
      default: 60_000,
      description: 'A fire handled later than this after its time is "missed" (docs/schedules.md).',
    }),
    scheduleListedFireTimes: setting.value({
      default: 5,
      description: "How many upcoming fire times a schedule's view lists.",
    }),
    schedulesPerApplication: setting.integer({
      env: 'TDP_SCHEDULES_PER_APPLICATION',
      default: 1_000,
      description:
        'Schedules one application may have (paused ones count); one more is refused with 422 `SCHEDULE_LIMIT` (`0`: no limit).',
    }),
    scheduleMinIntervalSeconds: setting.integer({
      env: 'TDP_SCHEDULE_MIN_INTERVAL_SECONDS',
      default: 60,
      description:
        'The shortest time between two fires of a schedule; a cron that fires more often is refused with 422 `SCHEDULE_TOO_FREQUENT` (`0`: no limit).',
    }),
    scheduleListLimit: setting.value({
      default: 500,
      description: 'At most this many schedules in `GET /v1/schedules`.',
    }),
    schedulesLoop: setting.value<LoopPacing>({
      // A round holds its due schedules while it creates their tasks; queued (QUEUE_ONE) fires are
      // looked at again every maxIdleMs, so that bounds how long one waits after its previous task ends.
      default: { batchSize: 20, maxIdleMs: 1_000, batchWindowMs: 0 },
      description: "The schedule loop's pacing.",
    }),
  }),
);

export const schedulesFeature = defineFeature({
  name: 'schedules',
  settings,
  start(host, settings) {
    const store = new PostgresScheduleStore(host.sql);
    const definitions = host.need('definitions');
    const schedules: ScheduleDeps = {
      schedules: store,
      definitions: definitions.catalog,
      schemas: definitions.schemas,
      clock: host.clock,
      ids: host.ids,
      listedFireTimes: settings.scheduleListedFireTimes,
      listLimit: settings.scheduleListLimit,
      limits: {
        perApplication: settings.schedulesPerApplication,
        minIntervalSeconds: settings.scheduleMinIntervalSeconds,
      },
    };
    host.provide('schedules', schedules);
    const tasks = host.need('tasks');
    const firing: FireDeps = {
      schedules: store,
      tasks: scheduledTasks(tasks.create, tasks.store),
      clock: host.clock,
      misfireGraceMs: settings.scheduleMisfireGraceMs,
    };
    const { batchSize } = settings.schedulesLoop;
    // Starts the tasks of due schedules (and queued QUEUE_ONE fires); sleeps until the next fire time.
    const loop = host.settings.runLoops
      ? host.loop({
          name: 'schedules',
          ...settings.schedulesLoop,
          round: async () => ({ full: (await fireDueSchedules(firing, batchSize)) === batchSize }),
          nextDueAt: () => store.nextDueAt(),
        })
      : null;
    if (loop) host.clock.onJump?.(() => loop.wake());
    return {
      loops: loop ? [loop] : [],
      routes: async (app) =>
        registerScheduleRoutes(app, { authenticator: host.need('identity').authenticator, schedules }),
    };
  },
});

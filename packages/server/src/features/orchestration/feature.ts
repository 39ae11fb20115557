/**
 * Orchestration: what follows a fact when its time comes — the timers (step timeouts, retry back-off,
 * cancel grace, sleeps, a child task's end) fired through the fact path, and child tasks cancelled
 * through the tasks feature's own cancel.
 */
import { Type } from 'typebox';
import { ClaimableRows } from '../../adapters/outbound/postgres/outboxQueue.ts';
import type { TimerDeps } from '../../core/orchestration/timers.ts';
import { defineFeature } from '../../host/feature.ts';
import type { LoopPacing } from '../../host/loops/wakeableLoop.ts';
import { setting, settingsSlice } from '../../host/settings.ts';
import { childTaskCancel } from './childTaskCancel.ts';
import { fireDueTimers } from './timers.ts';

const settings = settingsSlice(
  Type.Object({
    timersLoop: setting.value<LoopPacing>({
      default: { batchSize: 50, maxIdleMs: 5_000, batchWindowMs: 0 },
      description: "The timers loop's pacing.",
    }),
  }),
);

export const orchestrationFeature = defineFeature({
  name: 'orchestration',
  settings,
  start(host, settings) {
    if (!host.settings.runLoops) return {};
    const timers: TimerDeps = {
      ...host.need('status').deps,
      definitions: host.need('definitions').catalog,
      children: childTaskCancel(host.need('tasks').cancel),
    };
    const rows = new ClaimableRows(host.sql, 'timer');
    const { batchSize } = settings.timersLoop;
    const loop = host.loop({
      name: 'timers',
      ...settings.timersLoop,
      round: async () => ({ full: (await fireDueTimers(timers, rows, host.clock, batchSize)) === batchSize }),
      nextDueAt: () => rows.nextDueAt(),
    });
    host.afterCommit.subscribe({
      committed: (work) => {
        if (work.earliestTimer) loop.wakeBy(work.earliestTimer);
      },
    });
    // Timers sleep until their due time: after a test clock's jump they plan again.
    host.clock.onJump?.(() => loop.wake());
    return { loops: [loop] };
  },
});

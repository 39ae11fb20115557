import { type StepDefinition, stepKind } from '@tdp/protocol';

/**
 * A workflow's schedule-to-start limit, stored on each capability step that sets none of its own (a
 * task may still override it at create, core/tasks/snapshot.ts). Map items have no such limit yet.
 */
export function withScheduleToStart(steps: StepDefinition[], limitMs: number | undefined): StepDefinition[] {
  if (limitMs === undefined) return steps;
  return steps.map((step) =>
    stepKind(step) !== 'capability' || step.timeouts.scheduleToStartMs !== undefined
      ? step
      : { ...step, timeouts: { ...step.timeouts, scheduleToStartMs: limitMs } },
  );
}

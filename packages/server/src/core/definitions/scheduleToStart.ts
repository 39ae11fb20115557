import { type StepDefinition, stepKind } from '@tdp/protocol';

/**
 * The schedule-to-start limit of each capability step: the task's own (at create), else the step's, else
 * the default — the workflow's at publish, the server's at create (0: none). A step with a limit fails if
 * no worker starts it in time (timers.ts). Map items have no such limit yet.
 */
export function applyScheduleToStart(
  steps: StepDefinition[],
  taskLimitMs: number | undefined,
  defaultMs: number,
): StepDefinition[] {
  return steps.map((step) => {
    if (stepKind(step) !== 'capability') return step;
    const limit = taskLimitMs ?? step.timeouts.scheduleToStartMs ?? (defaultMs > 0 ? defaultMs : undefined);
    if (limit === undefined || limit === step.timeouts.scheduleToStartMs) return step;
    return { ...step, timeouts: { ...step.timeouts, scheduleToStartMs: limit } };
  });
}

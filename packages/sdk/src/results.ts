/**
 * A task's results typed by its workflow value. The server keeps a succeeded step's output as the step's
 * `data` (GET /v1/tasks/{id}) and sends the same values as a callback's `data.outputs`; steps that did
 * not succeed (failed, skipped, not reached) have none, so every output may be missing.
 */
import type { TaskWithExecution } from '@tdp/protocol';
import type { DefinedWorkflow, WorkflowOutputs } from './workflow.ts';

/** The outputs of a task's succeeded steps, by step key. */
export type TaskOutputs<W extends DefinedWorkflow> = Partial<WorkflowOutputs<W>>;

/** A task's view with the outputs of its succeeded steps, typed by its workflow. */
export interface TaskResult<W extends DefinedWorkflow> extends TaskWithExecution {
  outputs: TaskOutputs<W>;
}

/**
 * The outputs of the view's succeeded steps, typed by `workflow` (a `defineWorkflow()` value; it is not
 * read: the view is trusted to be a task of that workflow).
 */
export function outputsOf<W extends DefinedWorkflow>(_workflow: W, view: TaskWithExecution): TaskOutputs<W> {
  const succeeded = view.execution.steps.filter((step) => step.status === 'SUCCEEDED');
  return Object.fromEntries(succeeded.map((step) => [step.key, step.data])) as TaskOutputs<W>;
}

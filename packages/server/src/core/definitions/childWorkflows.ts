/**
 * The publish check of child-task steps (kind `task`): the workflow each one starts is published for the
 * tenant. A workflow can only name one published before it, and a published version never changes, so
 * child tasks cannot form a cycle (a workflow naming itself is refused as not yet published).
 */
import { type FieldError, type StepDefinition, stepKind } from '@tdp/protocol';
import type { DefinitionLookup } from './ports.ts';

export async function checkChildWorkflows(
  definitions: DefinitionLookup,
  tenantId: string,
  steps: StepDefinition[],
): Promise<FieldError[]> {
  const errors: FieldError[] = [];
  for (const [index, step] of steps.entries()) {
    if (stepKind(step) !== 'task' || !step.task) continue;
    const { workflowName, workflowVersion } = step.task;
    if (!(await definitions.resolve(tenantId, workflowName, workflowVersion))) {
      errors.push({
        path: `/steps/${index}/task`,
        message: `step "${step.key}" starts workflow "${workflowName}" version "${workflowVersion}", which is not published`,
      });
    }
  }
  return errors;
}

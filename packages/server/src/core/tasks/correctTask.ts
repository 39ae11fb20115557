/**
 * The administrator's correction (`POST /admin/v1/tasks/{id}:correct`, docs/operators.md): a task's or
 * one of its current steps' status set by an operator, never disguised as a worker's report. One fact
 * transaction writes the new task version, an immutable `ADMIN_CORRECTED` event with the old and new
 * values, the reason and the operator, a timeline milestone and the operator audit row; the realtime
 * projections publish it like any other change. It changes the record only: it stops no work on a
 * worker (cancel for that) and starts none (retry).
 */
import type { TaskWithExecution } from '@tdp/protocol';
import type { RegistryLookup } from '../definitions/ports.ts';
import { operatorNamed, operatorProducer } from '../facts/operatorActor.ts';
import type { OperatorActor, TaskState } from '../facts/records.ts';
import { type FactDeps, inFactTransaction } from '../facts/session.ts';
import { isRefusal } from '../facts/stateMachine.ts';
import { toTaskView } from '../facts/views.ts';
import { milestone } from '../orchestration/transitionRecords.ts';
import { AppError } from '../shared/errors.ts';
import { type CorrectionRequest, correctStepStatus, correctTaskStatus } from './correction.ts';

export const correctionEventType = 'ADMIN_CORRECTED';
export const correctionAuditAction = 'TASK_CORRECTED';

export interface CorrectDeps extends FactDeps {
  registries: Pick<RegistryLookup, 'statusDefinition'>;
}

export async function correctTask(
  deps: CorrectDeps,
  taskId: string,
  request: CorrectionRequest,
  actor: OperatorActor,
): Promise<{ task: TaskWithExecution; eventId: string; auditId: string; forced: boolean }> {
  return inFactTransaction(deps, async (session) => {
    const before = await session.lockTask(taskId);
    if (!before) throw new AppError('TASK_NOT_FOUND', `task ${taskId} does not exist`);
    await requireKnownBusinessStatus(deps, before, request.businessStatus);
    const now = session.now;
    const { after, old, corrected, forced, step } = planned(before, request, now);
    if (JSON.stringify(old) === JSON.stringify(corrected)) {
      throw new AppError('VALIDATION_FAILED', 'the correction changes nothing', [
        { path: '/lifecycleStatus', message: 'is the status already' },
      ]);
    }
    const eventId = deps.ids.newId();
    const auditId = deps.ids.newId();
    const details = {
      taskVersion: after.task.version.toString(),
      eventId,
      ...(step ? { stepKey: step.key } : {}),
      old,
      new: corrected,
      forced,
    };
    const target = step ? `step ${step.key}` : 'task';
    await session.commit(
      before,
      after,
      {
        id: eventId,
        type: correctionEventType,
        producer: operatorProducer(actor),
        payload: { ...details, reason: request.reason, operator: operatorNamed(actor) },
        occurredAt: now,
        receivedAt: now,
        ...(step ? { stepKey: step.key, stepAttempt: step.attempt, stepVersion: step.version } : {}),
      },
      {
        write: {
          task: after.task,
          ...(after.execution !== before.execution ? { execution: after.execution } : {}),
          ...(step ? { steps: [step] } : {}),
          timeline: [
            milestone(
              deps.ids,
              after,
              correctionEventType,
              `${target} corrected by ${actor.name}${forced ? ' (forced)' : ''}: ${describe(old)} → ${describe(corrected)}: ${request.reason}`,
              details,
              now,
            ),
          ],
          operatorAudit: [
            {
              id: auditId,
              action: correctionAuditAction,
              subjectId: taskId,
              actor,
              reason: request.reason,
              details,
              tenantId: before.task.tenantId,
              taskId,
              before: old,
              after: corrected,
              createdAt: now,
            },
          ],
        },
      },
    );
    return { task: toTaskView(after), eventId, auditId, forced };
  });
}

/**
 * A task bound to a status definition only takes the business statuses it registers, corrected or not
 * (`force` overrides the state machine, not the registry); a task bound to none takes any.
 */
async function requireKnownBusinessStatus(deps: CorrectDeps, state: TaskState, code: string | undefined) {
  if (code === undefined || state.task.statusDefinitionVersion === null) return;
  const definition = await deps.registries.statusDefinition(
    state.task.applicationId,
    state.task.taskType,
    state.task.statusDefinitionVersion,
  );
  if (!definition?.statuses.some((s) => s.code === code)) {
    throw new AppError(
      'UNKNOWN_BUSINESS_STATUS',
      `businessStatus "${code}" is not registered in the task's status definition`,
      [{ path: '/businessStatus', message: "is not registered in the task's status definition" }],
    );
  }
}

type Values = Record<string, string | null>;

function planned(before: TaskState, request: CorrectionRequest, now: Date) {
  if (request.stepKey === undefined) {
    const result = correctTaskStatus(before.task, before.execution, request, now);
    if (isRefusal(result)) throw new AppError(result.code, result.message);
    const values = (s: TaskState['task'], e: TaskState['execution']): Values => ({
      lifecycleStatus: s.lifecycleStatus,
      executionStatus: e.status,
      businessStatus: s.businessStatus,
    });
    return {
      after: { ...before, task: result.task, execution: result.execution },
      old: values(before.task, before.execution),
      corrected: values(result.task, result.execution),
      forced: result.forced,
      step: null,
    };
  }
  const current = before.steps.find((s) => s.current && s.key === request.stepKey);
  if (!current) {
    throw new AppError(
      'STEP_NOT_REGISTERED',
      `task ${before.task.id} has no current step ${request.stepKey}`,
    );
  }
  const result = correctStepStatus(current, request, now);
  if (isRefusal(result)) throw new AppError(result.code, result.message);
  const values = (s: typeof current): Values => ({ status: s.status, businessStatus: s.businessStatus });
  return {
    after: {
      ...before,
      task: { ...before.task, version: before.task.version + 1n, updatedAt: now },
      steps: before.steps.map((s) => (s.id === current.id ? result.step : s)),
    },
    old: values(current),
    corrected: values(result.step),
    forced: result.forced,
    step: result.step,
  };
}

const describe = (values: Values) =>
  Object.values(values)
    .filter((v) => v !== null)
    .join('/');

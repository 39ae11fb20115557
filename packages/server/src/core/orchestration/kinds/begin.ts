/**
 * STEP_BEGIN: a step the platform runs itself has become ready; its kind decides what it waits for.
 * Each kind's module owns its begin, its timers and its requests.
 */
import { stepKind } from '@tdp/protocol';
import type { StepRecord, TaskState } from '../../facts/records.ts';
import type { FactSession } from '../../facts/session.ts';
import type { ConsequenceDeps } from '../consequences.ts';
import { beginApproval } from './approval.ts';
import { beginChildTask, type ChildTaskDeps } from './childTask.ts';
import { beginMap } from './map.ts';
import { beginSignal } from './signal.ts';
import { beginSleep } from './sleep.ts';

/** What the kinds' begins need besides the consequences: the child task's workflow and cancel. */
export type KindDeps = ConsequenceDeps & ChildTaskDeps;

export async function beginStep(
  deps: KindDeps,
  session: FactSession,
  before: TaskState,
  step: StepRecord | undefined,
): Promise<void> {
  // The step moved on (cancelled, superseded) or has begun already (a timer fired twice).
  if (!step?.current || step.status !== 'RUNNING' || step.attemptId || step.waitingFor) return;
  const definition = before.execution.snapshot.steps.find((d) => d.key === step.key);
  if (!definition) return;
  const kind = stepKind(definition);
  switch (kind) {
    case 'sleep':
      return beginSleep(deps, session, before, step, definition);
    case 'signal':
      return beginSignal(deps, session, before, step, definition);
    case 'task':
      return beginChildTask(deps, session, before, step, definition);
    case 'approval':
      return beginApproval(deps, session, before, step, definition);
    case 'map':
      return beginMap(deps, session, before, step, definition);
    case 'capability':
      return;
    default: {
      const unknown: never = kind;
      throw new Error(`unknown step kind ${String(unknown)}`);
    }
  }
}

/**
 * The activities of the execution workflow: TDP's engine use cases (core/orchestration/
 * engineDecisions.ts), called by Temporal in this process.
 */
import type { FactConsequenceDeps } from '../../core/orchestration/consequences.ts';
import {
  applyEngineDecision,
  type EngineDecision,
  type EngineView,
  readForEngine,
  type SleepingStep,
  wakeSleepingStep,
} from '../../core/orchestration/engineDecisions.ts';

export interface EngineActivities {
  readExecution(taskId: string, executionId: string): Promise<EngineView>;
  applyDecision(decision: EngineDecision): Promise<Awaited<ReturnType<typeof applyEngineDecision>>>;
  wakeStep(sleeping: SleepingStep): Promise<void>;
}

export function engineActivities(deps: FactConsequenceDeps): EngineActivities {
  return {
    readExecution: (taskId, executionId) => readForEngine(deps, taskId, executionId),
    applyDecision: (decision) => applyEngineDecision(deps, decision),
    wakeStep: (sleeping) => wakeSleepingStep(deps, sleeping),
  };
}

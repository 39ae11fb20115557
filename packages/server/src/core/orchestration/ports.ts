/**
 * The tasks context's cancel, for a child task whose parent step was cancelled (orchestration never calls
 * another context's use case; wired in the orchestration feature, `features/orchestration/childTaskCancel.ts`).
 */
export interface ChildTaskCancel {
  /** Cancels the task as its application would; a task that has already ended is left as it is. */
  cancel(child: { taskId: string; tenantId: string; applicationId: string }, reason: string): Promise<void>;
}

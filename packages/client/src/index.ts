export {
  type Broadcast,
  bindTaskStore,
  type LiveTasks,
  type LiveTasksOptions,
  snapshotRetryDelay,
} from './live.ts';
export { TdpError, TdpUserClient } from './rest.ts';
export {
  type ConnectionState,
  elapsedMs,
  isTerminal,
  type Notice,
  type NotificationItem,
  type SnapshotItem,
  type TaskDetail,
  type TaskDetailStep,
  type TaskListItem,
  type TaskMessage,
  type TaskRemoved,
  TaskStore,
  type TaskSummary,
} from './taskStore.ts';
export { VisibilityReporter, type VisibilityReporterOptions } from './visibility.ts';

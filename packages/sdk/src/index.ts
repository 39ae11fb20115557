export type { AclPrincipalType } from './accessCalls.ts';
export {
  type CallbackEvent,
  type CallbackHeaders,
  callbackSignatureHeader,
  standardWebhookSecret,
  type VerifyCallbackOptions,
  verifyCallback,
} from './callbacks.ts';
export type { CapabilityCatalogue, CapabilityTypes, CatalogueOf } from './catalogue.ts';
export {
  type CreatedTask,
  createTdpClient,
  type TaskRef,
  type TaskRequestOf,
  TdpClient,
} from './client.ts';
export { type BatchedTaskEvent, TdpCoordinator } from './coordinator.ts';
export type { StepDecision, StepDecisionOptions } from './decisions.ts';
export { TdpApiError, type TdpErrorCode, TdpNetworkError, TdpWaitTimeoutError } from './errors.ts';
export {
  answerCallback,
  type CallbackAnswer,
  type CallbackHandlerOptions,
  expressCallbackHandler,
  type FastifyCallbackInstance,
  type FastifyCallbackReply,
  fastifyCallbackPlugin,
  nodeCallbackHandler,
} from './handlers.ts';
export { outputsOf, type TaskOutputs, type TaskResult } from './results.ts';
export { TdpSchedules } from './schedules.ts';
export { type CallOptions, clientDefaults, type RetryMode, type TdpClientOptions } from './transport.ts';
export type { CallbackDelivery, Page, TimelineEntry, WorkerSummary, WorkflowTaskAdded } from './views.ts';
export { terminalStatuses, type WaitForTaskOptions } from './waiting.ts';
export {
  type CheckedMapping,
  type DefinedWorkflow,
  defineWorkflow,
  type MapOutput,
  type MappingEntry,
  type MappingReference,
  type MapSpec,
  type OnItemFailure,
  type StepSettings,
  type StepSpec,
  WorkflowBuilder,
  type WorkflowInput,
  type WorkflowOutputs,
} from './workflow.ts';

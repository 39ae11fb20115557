/**
 * The status API for an application that runs steps itself and reports them (the coordinator role,
 * with its API key): activate a known step or register a dynamic one, then report its events and
 * heartbeats with the execution handle it got. Everything here is deduplicated by the server
 * (activation and registration by step, events by `eventId`, heartbeats by `heartbeatSeq`), so it is
 * retried like a read.
 */
import type {
  BatchItemResult,
  CompactTaskEvent,
  EventResult,
  ExecutionContext,
  FullTaskEvent,
  HeartbeatAnswer,
  HeartbeatItem,
  HeartbeatResult,
  RegisterExecutionRequest,
  TaskEventRequest,
} from '@tdp/protocol';
import type { CallOptions, createTransport } from './transport.ts';

/** An item of `reportEvents`: the compact form, or the full one with an execution token. */
export type BatchedTaskEvent = CompactTaskEvent | (FullTaskEvent & { executionToken?: string });

const segment = encodeURIComponent;

export class TdpCoordinator {
  constructor(private readonly transport: ReturnType<typeof createTransport>) {}

  private async call<T>(path: string, body: unknown, options: CallOptions): Promise<T> {
    return (await this.transport.send({ ...options, method: 'POST', path, body, retry: 'idempotent' }))
      .body as T;
  }

  /** Starts a step the task declared (`knownSteps`): its execution context, handle and token. */
  activateStep(
    taskId: string,
    stepKey: string,
    body: { attempt?: number } = {},
    options: CallOptions = {},
  ): Promise<ExecutionContext> {
    return this.call(`/v1/tasks/${segment(taskId)}/steps/${segment(stepKey)}:activate`, body, options);
  }

  /** Registers a dynamic step (the same `clientStepKey` + attempt returns the same execution). */
  registerExecution(
    taskId: string,
    request: RegisterExecutionRequest,
    options: CallOptions = {},
  ): Promise<ExecutionContext> {
    return this.call(`/v1/tasks/${segment(taskId)}/executions:register`, request, options);
  }

  /** Reports one event; a repeat of the same `eventId` answers `duplicate: true`. */
  reportEvent(event: TaskEventRequest, options: CallOptions = {}): Promise<EventResult> {
    return this.call('/v1/task-events', event, options);
  }

  /** Reports up to 500 events; each gets its own result. */
  reportEvents(
    events: BatchedTaskEvent[],
    options: CallOptions = {},
  ): Promise<{ results: BatchItemResult[] }> {
    return this.call('/v1/task-events:batch', { events }, options);
  }

  /**
   * Renews the leases of running executions; each heartbeat gets its own outcome, or with
   * `answer: 'exceptions'` only those not plainly ACCEPTED are listed (by index) beside `acceptedCount`.
   */
  reportHeartbeats(
    heartbeats: HeartbeatItem[],
    { answer, ...options }: CallOptions & { answer?: HeartbeatAnswer } = {},
  ): Promise<{ results: HeartbeatResult[]; acceptedCount: number; receivedAt: string }> {
    return this.call('/v1/task-heartbeats:batch', answer ? { heartbeats, answer } : { heartbeats }, options);
  }
}

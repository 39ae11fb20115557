/**
 * The seam the runtime reports through: REST's `WorkerClient`, or `GrpcReporting` (`@tdp/worker/grpc`),
 * apart from the gRPC code so that its types need no gRPC package.
 */
import type { WorkerEventOutcome } from '@tdp/protocol';

/** A report's answer: each event's outcome, and whether the server wrote the acknowledgements sent with it. */
export interface EventsReport {
  outcomes: WorkerEventOutcome[];
  /** False: the request that carried them was refused before its commit; they are still to be sent. */
  acked: boolean;
}

/** What the runtime reports through: REST's WorkerClient or GrpcReporting. */
export interface ReportingTransport {
  report(
    workerId: string,
    events: Record<string, unknown>[],
    commandAcks: string[],
    /** The W3C trace context of the report (REST sends it as the `traceparent` header). */
    traceparent?: string,
  ): Promise<EventsReport>;
  attemptHeartbeats(items: { executionToken: string; heartbeatSeq: number }[]): Promise<void>;
  /** The worker key from now on (REST's client is given it by the runtime itself). */
  setKey?(workerKey: string): void;
}

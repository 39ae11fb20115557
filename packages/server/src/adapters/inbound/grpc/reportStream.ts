/**
 * One `Report` stream: BindExecution gives a key valid only on this stream (it dies with it, and is
 * never stored), then events and heartbeats come by key. Requests that arrive while a round runs are
 * taken together in the next round (up to `roundSize`), as one REST batch would be, so a fast client is
 * answered in few transactions. The credential is checked when the stream opens and again before each
 * round: a revoked one ends the stream with its refusal. Flow control: at most `window` requests may be unanswered; a client that sends more has
 * broken the contract and the stream ends with RESOURCE_EXHAUSTED.
 */
import { status as GrpcStatus, type ServerDuplexStream } from '@grpc/grpc-js';
import { errorCatalogue, type WorkerEvent } from '@tdp/protocol';
import type { Logger } from 'pino';
import { AppError } from '../../../core/shared/errors.ts';
import type { StatusDeps } from '../../../core/status/deps.ts';
import { recordHeartbeats } from '../../../core/status/heartbeats.ts';
import type { WorkerOwner } from '../../../core/workers/ports.ts';
import { requireWorker, type WorkerDeps } from '../../../core/workers/workers.ts';
import type { RateLimits } from '../http/rateLimits.ts';
import type { Caller } from '../http/statusRouteContext.ts';
import { logReportedEvents } from '../http/taskLogs.ts';
import { serverSpan, traceIdOf } from '../http/tracing.ts';
import { reportEventBodies, reportWorkerEvents } from '../reportCommands.ts';
import { grpcCodeOf, problemOfError } from './errors.ts';
import {
  checkBoundEvent,
  checkHeartbeat,
  checkWorkerEvent,
  type EventMessage,
  eventBody,
  eventResultMessage,
  heartbeatResultMessage,
  problemMessage,
} from './wire.ts';

/** Who opened the stream: a worker key (its credential id), or what REST's caller() makes of the token. */
export type StreamCaller = { kind: 'worker'; credentialId: string } | { kind: 'status'; who: Caller | null };

type Binding =
  | { kind: 'token'; token: string; executionId: string }
  | { kind: 'handle'; handle: string; executionId: string }
  | { kind: 'attempt'; worker: WorkerOwner; attemptId: string; leaseVersion: number };

interface StreamRequest {
  requestId: number;
  item?: 'bind' | 'event' | 'heartbeat';
  bind?: {
    credential?: 'executionToken' | 'executionHandle' | 'attempt';
    executionToken?: string;
    executionHandle?: string;
    attempt?: { workerId: string; attemptId: string; leaseVersion: number };
  };
  event?: { streamExecutionKey: number; event?: EventMessage };
  heartbeat?: { streamExecutionKey: number; heartbeatSeq: number };
  commandAcks: string[];
  /** The W3C trace context of the client's report (REST's `traceparent` header). */
  traceparent?: string;
}

type Outcome = Record<string, unknown>;

export interface ReportStreamDeps {
  status: StatusDeps;
  workers: WorkerDeps;
  rateLimits: RateLimits;
  logger: Logger;
  /** Requests a client may have unanswered at once. */
  window: number;
  /** Executions bound at once on one stream; binding one more forgets the oldest. */
  maxBindings: number;
  /** Requests one round takes at most (one transaction). */
  roundSize: number;
  /**
   * Checks the stream's credential again (cached, and forgotten at once when it is revoked): throws the
   * refusal once it is no longer valid. Before every round, so a revoked key's stream ends at its next
   * message.
   */
  recheck: () => Promise<void>;
  /** JSON in an event nesting deeper is refused with JSON_TOO_DEEP. */
  jsonMaxDepth: number;
}

export class ReportStream {
  private readonly bindings = new Map<number, Binding>();
  private nextKey = 1;
  private queue: StreamRequest[] = [];
  private unanswered = 0;
  private running = false;
  private ended = false;
  private closing = false;

  constructor(
    private readonly deps: ReportStreamDeps,
    private readonly call: ServerDuplexStream<{ items: StreamRequest[] }, object>,
    private readonly caller: Promise<StreamCaller>,
    private readonly onDone: () => void,
  ) {
    call.on('data', (frame: { items: StreamRequest[] }) => {
      for (const request of frame.items) this.receive(request);
    });
    call.on('end', () => {
      this.ended = true;
      void this.pump();
    });
    call.on('error', () => this.finish());
    call.on('cancelled', () => this.finish());
    call.write({ ready: { window: deps.window } });
    // A refused credential ends the stream at once, with the same code REST would answer.
    caller.catch((error) => this.fail(error));
  }

  /** Shutdown: answers what was received, then ends the stream (the client reconnects and binds again). */
  close(): void {
    this.closing = true;
    void this.pump();
  }

  private receive(request: StreamRequest): void {
    if (this.closing) return;
    this.unanswered += 1;
    if (this.unanswered > this.deps.window) {
      this.endWith(GrpcStatus.RESOURCE_EXHAUSTED, `more than ${this.deps.window} requests unanswered`);
      return;
    }
    this.queue.push(request);
    void this.pump();
  }

  private async pump(): Promise<void> {
    if (this.running) return;
    this.running = true;
    try {
      let caller: StreamCaller;
      try {
        caller = await this.caller;
      } catch {
        return; // refused: fail() ended the stream
      }
      while (this.queue.length > 0 && !this.done) {
        // One turn of the event loop first: requests already on the socket join this round, which would
        // otherwise be the burst's first request alone (a transaction for one event).
        await new Promise((resolve) => setImmediate(resolve));
        try {
          await this.deps.recheck();
        } catch (error) {
          this.fail(error);
          return;
        }
        const round = this.queue.splice(0, this.deps.roundSize);
        await this.answer(caller, round);
      }
    } catch (error) {
      // A bug, not a refusal (those are answered per item): the stream ends rather than stall.
      this.deps.logger.error({ err: error }, 'gRPC report stream failed');
      this.endWith(GrpcStatus.INTERNAL, 'INTERNAL_ERROR: an unexpected error occurred; it has been logged');
      return;
    } finally {
      this.running = false;
    }
    if (this.done) return;
    if (this.closing) this.endWith(GrpcStatus.UNAVAILABLE, 'SHUTTING_DOWN: the server is shutting down');
    else if (this.ended && this.queue.length === 0) {
      this.call.end();
      this.finish();
    }
  }

  private get done(): boolean {
    return this.call.destroyed || this.finished;
  }

  private finished = false;
  private finish(): void {
    if (this.finished) return;
    this.finished = true;
    this.bindings.clear();
    this.onDone();
  }

  private endWith(code: GrpcStatus, details: string): void {
    if (this.done) return;
    this.call.emit('error', { code, details });
    this.finish();
  }

  private fail(error: unknown): void {
    const { code, detail } = problemOfError(error);
    this.endWith(grpcCodeOf(errorCatalogue[code].status), `${code}: ${detail}`);
  }

  /** One round: binds first (in order), then events and heartbeats, each group in one service call. */
  private async answer(caller: StreamCaller, round: StreamRequest[]): Promise<void> {
    const results = new Map<number, Outcome>();
    const refuse = (request: StreamRequest, error: AppError) =>
      results.set(request.requestId, { problem: problemMessage(error.code, error.message) });
    for (const request of round.filter((r) => r.item === 'bind')) {
      try {
        results.set(request.requestId, { bound: { streamExecutionKey: await this.bind(caller, request) } });
      } catch (error) {
        this.refuseAll([request], error, results);
      }
    }
    const statusEvents: { request: StreamRequest; body: Record<string, unknown> }[] = [];
    const workerEvents = new Map<
      string,
      { worker: WorkerOwner; items: { request: StreamRequest; event: WorkerEvent }[] }
    >();
    const heartbeats: { request: StreamRequest; body: Record<string, unknown> }[] = [];
    // Like a REST batch, a round charges each execution once.
    const charged = new Map<string, AppError | null>();
    for (const request of round) {
      if (request.item === 'bind') continue;
      try {
        const keyed = request.event ?? request.heartbeat;
        if (!keyed) throw new AppError('VALIDATION_FAILED', '/ must have one of bind, event, heartbeat');
        const binding = this.bindings.get(keyed.streamExecutionKey);
        if (!binding)
          throw new AppError(
            'STREAM_EXECUTION_KEY_UNKNOWN',
            `stream execution key ${keyed.streamExecutionKey} is not bound on this stream; bind the execution again`,
          );
        if (request.heartbeat) {
          const body = this.heartbeatBody(binding, request.heartbeat);
          checkHeartbeat(body);
          // As the REST heartbeat batch does: each execution is charged once per round.
          if (binding.kind !== 'attempt') this.chargeOnce(charged, binding.executionId);
          heartbeats.push({ request, body });
        } else if (binding.kind === 'attempt') {
          const event = {
            attemptId: binding.attemptId,
            leaseVersion: binding.leaseVersion,
            ...eventBody(request.event!.event, this.deps.jsonMaxDepth),
          };
          checkWorkerEvent(event);
          const group = workerEvents.get(binding.worker.id) ?? { worker: binding.worker, items: [] };
          group.items.push({ request, event: event as unknown as WorkerEvent });
          workerEvents.set(binding.worker.id, group);
        } else {
          const body = {
            ...eventBody(request.event!.event, this.deps.jsonMaxDepth),
            ...(binding.kind === 'token'
              ? { executionToken: binding.token }
              : { executionHandle: binding.handle }),
          };
          checkBoundEvent(body);
          this.chargeOnce(charged, binding.executionId);
          statusEvents.push({ request, body });
        }
      } catch (error) {
        if (!(error instanceof AppError)) throw error;
        refuse(request, error);
      }
    }
    const who = caller.kind === 'status' ? caller.who : null;
    await Promise.all([
      this.guarded(
        statusEvents.map((e) => e.request),
        results,
        async () => {
          const answers = await this.inSpan(
            statusEvents.map((e) => e.request),
            () =>
              reportEventBodies(
                this.deps.status,
                who,
                statusEvents.map((e) => e.body),
              ),
          );
          answers.forEach((answer, i) => {
            results.set(
              statusEvents[i]!.request.requestId,
              answer.ok
                ? { event: eventResultMessage(answer.result!) }
                : { problem: problemMessage(answer.error!.code as never, answer.error!.detail) },
            );
          });
        },
      ),
      ...[...workerEvents.values()].map(({ worker, items }) =>
        this.guarded(
          items.map((i) => i.request),
          results,
          async () => {
            if (caller.kind === 'worker') this.deps.rateLimits.charge('worker', caller.credentialId);
            const acks = items.flatMap((i) => i.request.commandAcks);
            const events = items.map((i) => i.event);
            const answers = await this.inSpan(
              items.map((i) => i.request),
              async () => {
                const outcomes = await reportWorkerEvents(this.deps.status, worker, events, acks);
                logReportedEvents(this.deps.logger, traceIdOf(this.deps.status.tracing), events, outcomes);
                return outcomes;
              },
            );
            answers.forEach((answer, i) => {
              results.set(
                items[i]!.request.requestId,
                answer.ok
                  ? { event: eventResultMessage(answer.result) }
                  : { problem: problemMessage(answer.code as never, answer.detail, answer.status) },
              );
            });
          },
        ),
      ),
      this.guarded(
        heartbeats.map((h) => h.request),
        results,
        async () => {
          const principal = who?.kind === 'application' ? who.principal : null;
          const answers = await recordHeartbeats(
            this.deps.status,
            principal,
            heartbeats.map((h) => h.body) as never,
          );
          answers.forEach((answer, i) => {
            results.set(heartbeats[i]!.request.requestId, { heartbeat: heartbeatResultMessage(answer) });
          });
        },
      ),
    ]);
    if (this.done) return;
    // One message for the round's answers: a write per answer costs more than the answer.
    this.call.write({
      results: { items: round.map((r) => ({ requestId: r.requestId, ...results.get(r.requestId) })) },
    });
    this.unanswered -= round.length;
  }

  /**
   * A server span for one group's commit, continuing the first trace context its requests carry (as a
   * REST batch continues its `traceparent` header).
   */
  private inSpan<T>(requests: StreamRequest[], work: () => Promise<T>): Promise<T> {
    const parent = requests.find((r) => r.traceparent)?.traceparent ?? null;
    return serverSpan(this.deps.status.tracing, 'Reporting/Report events', parent, work);
  }

  /** Charges an execution once per round; its refusal (RATE_LIMITED) refuses each of its events. */
  private chargeOnce(charged: Map<string, AppError | null>, executionId: string): void {
    let refusal = charged.get(executionId);
    if (refusal === undefined) {
      try {
        this.deps.rateLimits.charge('execution', executionId);
        refusal = null;
      } catch (error) {
        if (!(error instanceof AppError)) throw error;
        refusal = error;
      }
      charged.set(executionId, refusal);
    }
    if (refusal) throw refusal;
  }

  /** Runs one group's service call; if it fails as a whole, each of its requests gets the problem. */
  private async guarded(requests: StreamRequest[], results: Map<number, Outcome>, run: () => Promise<void>) {
    if (requests.length === 0) return;
    try {
      await run();
    } catch (error) {
      this.refuseAll(requests, error, results);
    }
  }

  private refuseAll(requests: StreamRequest[], error: unknown, results: Map<number, Outcome>): void {
    const { code, detail, unexpected } = problemOfError(error);
    if (unexpected) this.deps.logger.error({ err: error }, 'gRPC report stream round failed');
    for (const request of requests) results.set(request.requestId, { problem: problemMessage(code, detail) });
  }

  private async bind(caller: StreamCaller, request: StreamRequest): Promise<number> {
    const bind = request.bind!;
    const binding = await this.resolve(caller, bind);
    if (this.bindings.size >= this.deps.maxBindings) this.bindings.delete(this.bindings.keys().next().value!);
    const key = this.nextKey++;
    this.bindings.set(key, binding);
    return key;
  }

  private async resolve(caller: StreamCaller, bind: NonNullable<StreamRequest['bind']>): Promise<Binding> {
    const { status } = this.deps;
    if (bind.executionToken) {
      const claims = await status.credentials.verify(bind.executionToken, status.clock.now());
      if (!claims)
        throw new AppError('EXECUTION_CREDENTIAL_INVALID', 'the execution token is invalid or expired');
      this.deps.rateLimits.charge('execution', claims.executionId);
      return { kind: 'token', token: bind.executionToken, executionId: claims.executionId };
    }
    if (bind.executionHandle) {
      const who = caller.kind === 'status' ? caller.who : null;
      if (who?.kind !== 'application')
        throw new AppError('UNAUTHENTICATED', 'an executionHandle is used with your API key in the metadata');
      const [attempt] = await status.store.attemptsByHandle([
        status.credentials.hashHandle(bind.executionHandle),
      ]);
      if (
        !attempt ||
        attempt.applicationId !== who.principal.applicationId ||
        attempt.expiresAt <= status.clock.now()
      )
        throw new AppError(
          'EXECUTION_CREDENTIAL_INVALID',
          'the execution handle is unknown, expired or not yours',
        );
      return { kind: 'handle', handle: bind.executionHandle, executionId: attempt.id };
    }
    if (bind.attempt) {
      if (caller.kind !== 'worker')
        throw new AppError('UNAUTHENTICATED', 'an attempt is bound with a worker key in the metadata');
      const worker = await requireWorker(this.deps.workers, caller.credentialId, bind.attempt.workerId, true);
      return {
        kind: 'attempt',
        worker,
        attemptId: bind.attempt.attemptId,
        leaseVersion: bind.attempt.leaseVersion,
      };
    }
    throw new AppError(
      'VALIDATION_FAILED',
      '/bind must have one of executionToken, executionHandle, attempt',
    );
  }

  private heartbeatBody(binding: Binding, beat: { heartbeatSeq: number }): Record<string, unknown> {
    if (binding.kind === 'attempt')
      throw new AppError('EXECUTION_CREDENTIAL_INVALID', 'heartbeats need the execution bound by its token');
    return binding.kind === 'token'
      ? { executionToken: binding.token, heartbeatSeq: beat.heartbeatSeq }
      : { executionHandle: binding.handle, heartbeatSeq: beat.heartbeatSeq };
  }
}

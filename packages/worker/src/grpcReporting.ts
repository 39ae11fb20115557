/**
 * Reporting over gRPC (docs/grpc.md): the bidirectional `Report` stream of
 * `@tdp/protocol`'s reporting.proto. `ReportStreamClient` is one stream: it waits for the server's
 * window, never has more requests unanswered than that, sends what it has in one frame, and answers
 * each request by its id.
 * `GrpcReporting` is the runtime's reporting transport over it (the seam REST's WorkerClient fills
 * too): each attempt is bound once per stream, events and heartbeats go by key; when the stream breaks,
 * every unanswered request fails as UnavailableError, the sender sends the batch again on a new stream
 * (binding again: a key dies with its stream), and the server's dedup applies each event once.
 */
import {
  type ClientDuplexStream,
  credentials,
  status as GrpcStatus,
  loadPackageDefinition,
  Metadata,
} from '@grpc/grpc-js';
import { loadSync } from '@grpc/proto-loader';
import {
  eventMessageOf,
  reportingProtoOptions,
  reportingProtoPath,
  type WorkerEventOutcome,
} from '@tdp/protocol';
import { RejectedError, UnavailableError } from './client.ts';
import type { EventsReport, ReportingTransport } from './reporting.ts';

export type { EventsReport, ReportingTransport } from './reporting.ts';

export interface StreamProblem {
  code: string;
  status: number;
  detail: string;
  retryable: boolean;
}

/** One answer of the stream: the item's outcome (`problem` when it was refused). */
export interface ItemResult {
  requestId: number;
  outcome: 'bound' | 'event' | 'heartbeat' | 'problem';
  bound?: { streamExecutionKey: number };
  event?: Record<string, unknown>;
  heartbeat?: Record<string, unknown>;
  problem?: StreamProblem;
}

export type BindCredential =
  | { executionToken: string }
  | { executionHandle: string }
  | { attempt: { workerId: string; attemptId: string; leaseVersion: number } };

type ReportingClient = {
  Report(
    metadata: Metadata,
  ): ClientDuplexStream<
    object,
    { message: string; ready?: { window: number }; results?: { items: ItemResult[] } }
  >;
  close(): void;
};

let loaded:
  | (new (
      address: string,
      creds: ReturnType<typeof credentials.createInsecure>,
    ) => ReportingClient)
  | null = null;

/** A client of the `Reporting` service (unary calls included), from the protocol's `.proto`. */
export function reportingClient(address: string): ReportingClient {
  loaded ??= (
    loadPackageDefinition(loadSync(reportingProtoPath, reportingProtoOptions)) as unknown as {
      tdp: { reporting: { v1: { Reporting: typeof loaded } } };
    }
  ).tdp.reporting.v1.Reporting;
  return new loaded!(address, credentials.createInsecure());
}

export class ReportStreamClient {
  private readonly call: ReturnType<ReportingClient['Report']>;
  private readonly pending = new Map<
    number,
    { resolve: (r: ItemResult) => void; reject: (e: Error) => void }
  >();
  private readonly waiting: (() => void)[] = [];
  private unsent: object[] = [];
  private window = 0;
  private nextId = 1;
  private broken: UnavailableError | RejectedError | null = null;
  readonly ready: Promise<void>;

  constructor(client: ReportingClient, bearer: string | null) {
    const metadata = new Metadata();
    if (bearer) metadata.set('authorization', `Bearer ${bearer}`);
    this.call = client.Report(metadata);
    let opened!: () => void;
    let failed!: (error: Error) => void;
    this.ready = new Promise((resolve, reject) => {
      opened = resolve;
      failed = reject;
    });
    this.ready.catch(() => {});
    this.call.on('data', (message) => {
      if (message.ready) {
        this.window = message.ready.window;
        opened();
        this.release();
        return;
      }
      for (const result of message.results?.items ?? []) {
        const outcome = ['bound', 'event', 'heartbeat', 'problem'].find(
          (k) => k in result,
        ) as ItemResult['outcome'];
        const entry = this.pending.get(result.requestId);
        this.pending.delete(result.requestId);
        entry?.resolve({ ...result, outcome });
      }
      this.release();
    });
    const breakWith = (error: Error & { code?: number }) => {
      if (this.broken) return;
      // The worker key refused (when the stream opens, or on a later batch): as REST's 401/403.
      const refused =
        error.code === GrpcStatus.UNAUTHENTICATED || error.code === GrpcStatus.PERMISSION_DENIED;
      this.broken = refused
        ? new RejectedError(
            error.code === GrpcStatus.UNAUTHENTICATED ? 401 : 403,
            `gRPC report stream: ${error.message}`,
          )
        : new UnavailableError(`gRPC report stream: ${error.message}`, { cause: error });
      failed(this.broken);
      for (const entry of this.pending.values()) entry.reject(this.broken);
      this.pending.clear();
      for (const wake of this.waiting.splice(0)) wake();
    };
    this.call.on('error', breakWith);
    this.call.on('end', () => breakWith(new Error('the server ended the stream')));
  }

  get isBroken(): boolean {
    return this.broken !== null;
  }

  bind(credential: BindCredential): Promise<ItemResult> {
    return this.send({ bind: credential });
  }

  /** An event of a bound execution; `traceparent` is its report's trace context (REST's header). */
  event(
    key: number,
    event: Record<string, unknown>,
    commandAcks: string[] = [],
    traceparent?: string,
  ): Promise<ItemResult> {
    return this.send({
      event: { streamExecutionKey: key, event },
      commandAcks,
      ...(traceparent ? { traceparent } : {}),
    });
  }

  heartbeat(key: number, heartbeatSeq: number): Promise<ItemResult> {
    return this.send({ heartbeat: { streamExecutionKey: key, heartbeatSeq } });
  }

  /** Sends when the window has room (flow control), and resolves with the request's answer. */
  private async send(item: Record<string, unknown>): Promise<ItemResult> {
    await this.ready;
    while (!this.broken && this.pending.size >= this.window)
      await new Promise<void>((resolve) => this.waiting.push(resolve));
    if (this.broken) throw this.broken;
    const requestId = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(requestId, { resolve, reject });
      // What is sent in one turn of the event loop goes out in one frame (one message, one write).
      if (this.unsent.length === 0) setImmediate(() => this.flush());
      this.unsent.push({ requestId, ...item });
    });
  }

  private flush(): void {
    if (this.unsent.length === 0 || this.broken) return;
    this.call.write({ items: this.unsent });
    this.unsent = [];
  }

  private release(): void {
    while (this.waiting.length > 0 && this.pending.size < this.window) this.waiting.shift()!();
  }

  close(): void {
    this.flush();
    this.call.end();
  }
}

/** The runtime's reporting transport over one stream at a time (opened again after a break). */
export class GrpcReporting implements ReportingTransport {
  private client: ReportingClient | null = null;
  private stream: ReportStreamClient | null = null;
  /** Keys of this stream, by attempt (and lease version) or token; the oldest go past `maxKeys`. */
  private keys = new Map<string, Promise<number | StreamProblem>>();
  private static readonly maxKeys = 1_000;

  constructor(
    /** `host:port`, or a function giving it once known (the server announces its port at registration). */
    private readonly address: string | (() => string | null),
    private workerKey: string,
  ) {}

  /** The worker key from now on: the open stream (opened with the old one) is closed, the next opens anew. */
  setKey(workerKey: string): void {
    this.workerKey = workerKey;
    this.stream?.close();
    this.stream = null;
  }

  private open(): ReportStreamClient {
    if (this.stream && !this.stream.isBroken) return this.stream;
    const address = typeof this.address === 'string' ? this.address : this.address();
    if (!address) throw new UnavailableError('the gRPC reporting address is not known yet');
    this.client ??= reportingClient(address);
    this.keys = new Map();
    this.stream = new ReportStreamClient(this.client, this.workerKey);
    return this.stream;
  }

  private key(stream: ReportStreamClient, id: string, credential: BindCredential) {
    // This stream's map: a bind of an older stream settling late must not touch a newer stream's keys.
    const keys = this.keys;
    let key = keys.get(id);
    if (!key) {
      if (keys.size >= GrpcReporting.maxKeys) keys.delete(keys.keys().next().value!);
      const bound: Promise<number | StreamProblem> = stream.bind(credential).then((r) => {
        // A refused bind is not kept: the next batch tries again (after a 5xx, or a new lease).
        if (!r.bound) this.forget(keys, id, bound);
        return r.bound?.streamExecutionKey ?? r.problem!;
      });
      key = bound;
      keys.set(id, key);
      key.catch(() => this.forget(keys, id, bound));
    }
    return key;
  }

  /** Drops a binding, unless another bind has replaced it meanwhile (then that one stays). */
  private forget(keys: Map<string, Promise<number | StreamProblem>>, id: string, key: Promise<unknown>) {
    if (keys.get(id) === key) keys.delete(id);
  }

  /**
   * The acknowledgements ride on the first event; the server writes them in that event's commit, so they
   * count as written only when that event was accepted. Refused (a bind or a check before the commit),
   * they are left for the next report or the REST acknowledgement loop: acknowledging twice is harmless,
   * never acknowledging makes the server resend the command every `commandResendAfterMs`.
   */
  async report(
    workerId: string,
    events: Record<string, unknown>[],
    commandAcks: string[],
    traceparent?: string,
  ): Promise<EventsReport> {
    const outcomes = await this.sendEvents(workerId, events, commandAcks, traceparent);
    return { outcomes, acked: commandAcks.length === 0 || outcomes[0]?.ok === true };
  }

  async sendEvents(
    workerId: string,
    events: Record<string, unknown>[],
    commandAcks: string[] = [],
    traceparent?: string,
  ): Promise<WorkerEventOutcome[]> {
    const stream = this.open();
    return Promise.all(
      events.map(async (body, index): Promise<WorkerEventOutcome> => {
        const eventId = body.eventId as string;
        const attempt = {
          workerId,
          attemptId: body.attemptId as string,
          leaseVersion: body.leaseVersion as number,
        };
        const id = `${attempt.attemptId}/${attempt.leaseVersion}`;
        const send = async () => {
          const key = await this.key(stream, id, { attempt });
          return typeof key === 'number'
            ? stream.event(key, eventMessageOf(body), index === 0 ? commandAcks : [], traceparent)
            : { problem: key, event: undefined };
        };
        const used = this.keys.get(id);
        let answer = await send();
        if (answer.problem?.code === 'STREAM_EXECUTION_KEY_UNKNOWN') {
          // The server forgot the binding (its per-stream limit): bind again and resend, once. Only the
          // binding this event used is dropped: a sibling event may already have bound it again.
          if (used) this.forget(this.keys, id, used);
          answer = await send();
        }
        if (answer.event) return { index, eventId, ok: true, result: answer.event as never };
        const problem = answer.problem!;
        // Not this event's fault: the sender sends the batch again later (the server's dedup applies it once).
        if (
          problem.status >= 500 ||
          problem.code === 'RATE_LIMITED' ||
          problem.code === 'STREAM_EXECUTION_KEY_UNKNOWN'
        )
          throw new UnavailableError(`event ${eventId}: ${problem.code}`, { serverDown: false });
        return {
          index,
          eventId,
          ok: false,
          code: problem.code,
          status: problem.status,
          detail: problem.detail,
        };
      }),
    );
  }

  async attemptHeartbeats(items: { executionToken: string; heartbeatSeq: number }[]): Promise<void> {
    const stream = this.open();
    await Promise.all(
      items.map(async (item) => {
        const key = await this.key(stream, item.executionToken, { executionToken: item.executionToken });
        if (typeof key !== 'number') return;
        const answer = await stream.heartbeat(key, item.heartbeatSeq);
        // Forgotten by the server: bound again at the next beat.
        if (answer.problem?.code === 'STREAM_EXECUTION_KEY_UNKNOWN') this.keys.delete(item.executionToken);
      }),
    );
  }

  close(): void {
    this.stream?.close();
    this.client?.close();
  }
}

/** `host:port` of the gRPC reporting port on the host of a server URL; null without a port. */
export function grpcAddressOf(serverUrl: string, port: number | null): string | null {
  if (!port) return null;
  const host = new URL(serverUrl).hostname;
  return `${host.includes(':') ? `[${host.replace(/^\[|\]$/g, '')}]` : host}:${port}`;
}

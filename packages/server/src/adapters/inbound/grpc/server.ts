/**
 * The gRPC reporting adapter (docs/grpc.md): `Reporting` of
 * `@tdp/protocol/proto/tdp/reporting/v1/reporting.proto` over @grpc/grpc-js. It authenticates like REST
 * (the metadata's `authorization: Bearer …`), decodes into the REST body, checks it with the same schema
 * and hands it to the same application service as the REST routes: the same validation, dedup,
 * versions and answers. Refusals are gRPC statuses carrying the Problem (errors.ts).
 */
import {
  type handleBidiStreamingCall,
  type Metadata,
  Server,
  ServerCredentials,
  type ServerDuplexStream,
  type ServerUnaryCall,
  type ServiceDefinition,
  type sendUnaryData,
} from '@grpc/grpc-js';
import { loadSync } from '@grpc/proto-loader';
import { reportingProtoOptions, reportingProtoPath, reportingServiceName } from '@tdp/protocol';
import type { Logger } from 'pino';
import { AppError } from '../../../core/shared/errors.ts';
import type { StatusDeps } from '../../../core/status/deps.ts';
import { reportTaskEvent } from '../../../core/status/events.ts';
import { recordHeartbeats } from '../../../core/status/heartbeats.ts';
import { authenticateWorkerKey, type WorkerDeps } from '../../../core/workers/workers.ts';
import type { RateLimits } from '../http/rateLimits.ts';
import type { StatusCallers } from '../http/statusRouteContext.ts';
import { credentialFor, decodeReportedEvent } from '../reportCommands.ts';
import { problemOfError, serviceError } from './errors.ts';
import { ReportStream, type StreamCaller } from './reportStream.ts';
import {
  checkHeartbeat,
  checkSingleEvent,
  type EventMessage,
  eventBody,
  eventResultMessage,
  heartbeatResultMessage,
} from './wire.ts';

export interface GrpcReportingDeps {
  status: StatusDeps;
  callers: Pick<StatusCallers, 'callerOf' | 'chargeExecutions'>;
  workers: WorkerDeps;
  rateLimits: RateLimits;
  logger: Logger;
  /** Requests a stream client may have unanswered at once (its flow-control window). */
  streamWindow: number;
  /** Executions bound at once on one stream. */
  streamMaxBindings: number;
  /** Requests one round of a stream takes at most (one transaction). */
  streamRoundSize: number;
  /** JSON in an event nesting deeper is refused with JSON_TOO_DEEP, as REST's body parser does. */
  jsonMaxDepth: number;
}

export interface RunningGrpc {
  port: number;
  /** Ends the streams (after answering what they received), then stops; forced after `graceMs`. */
  close(graceMs: number): Promise<void>;
}

const bearerOf = (metadata: Metadata): string | null => {
  const value = metadata.get('authorization')[0];
  return typeof value === 'string' ? (/^Bearer\s+(\S+)$/i.exec(value)?.[1] ?? null) : null;
};

export async function startGrpcReporting(
  deps: GrpcReportingDeps,
  listen: { host: string; port: number },
): Promise<RunningGrpc> {
  const definition = loadSync(reportingProtoPath, reportingProtoOptions);
  const service = definition[reportingServiceName] as ServiceDefinition;
  const serializers = {
    problem: (definition['tdp.reporting.v1.Problem'] as unknown as { serialize: (v: object) => Buffer })
      .serialize,
    status: (definition['tdp.reporting.v1.RpcStatus'] as unknown as { serialize: (v: object) => Buffer })
      .serialize,
  };
  const streams = new Set<ReportStream>();

  /** Runs a unary handler; a refusal or failure becomes the status REST's problem maps to. */
  function unary<Req>(name: string, handle: (request: Req, metadata: Metadata) => Promise<object>) {
    return (call: ServerUnaryCall<Req, object>, callback: sendUnaryData<object>) => {
      handle(call.request, call.metadata).then(
        (reply) => callback(null, reply),
        (error) => {
          const { code, detail, unexpected } = problemOfError(error);
          if (unexpected) deps.logger.error({ err: error, rpc: name }, 'gRPC call failed');
          callback(serviceError(code, detail, serializers));
        },
      );
    };
  }

  const reportEvent = unary<{ executionToken?: string; executionHandle?: string; event?: EventMessage }>(
    'ReportEvent',
    async (request, metadata) => {
      const body = {
        ...eventBody(request.event, deps.jsonMaxDepth),
        ...(request.executionHandle !== undefined ? { executionHandle: request.executionHandle } : {}),
      };
      checkSingleEvent(body);
      const who = await deps.callers.callerOf(bearerOf(metadata), 'Reporting/ReportEvent');
      await deps.callers.chargeExecutions([request.executionToken], who);
      const credential = request.executionToken
        ? { kind: 'token' as const, token: request.executionToken }
        : credentialFor(who, body);
      return eventResultMessage(
        await reportTaskEvent(deps.status, { credential, event: decodeReportedEvent(body) }),
      );
    },
  );

  const heartbeat = unary<{
    executionToken?: string;
    executionHandle?: string;
    heartbeatSeq: number;
    executionId?: string;
  }>('Heartbeat', async (request, metadata) => {
    const who = await deps.callers.callerOf(bearerOf(metadata), 'Reporting/Heartbeat');
    const token = request.executionToken ?? (who?.kind === 'token' ? who.token : undefined);
    const body = {
      ...(token !== undefined ? { executionToken: token } : {}),
      ...(request.executionHandle !== undefined ? { executionHandle: request.executionHandle } : {}),
      ...(request.executionId !== undefined ? { executionId: request.executionId } : {}),
      heartbeatSeq: request.heartbeatSeq,
    };
    checkHeartbeat(body);
    await deps.callers.chargeExecutions([token], who);
    const principal = who?.kind === 'application' ? who.principal : null;
    const [result] = await recordHeartbeats(deps.status, principal, [body as never]);
    return heartbeatResultMessage(result!);
  });

  async function streamCaller(metadata: Metadata): Promise<StreamCaller> {
    const token = bearerOf(metadata);
    if (token?.startsWith('tdpw_')) {
      const credentialId = await workerCredential(token);
      deps.rateLimits.charge('worker', credentialId);
      return { kind: 'worker', credentialId };
    }
    return { kind: 'status', who: await deps.callers.callerOf(token, 'Reporting/Report') };
  }

  async function workerCredential(token: string): Promise<string> {
    const credentialId = await authenticateWorkerKey(deps.workers, token);
    if (!credentialId) throw new AppError('UNAUTHENTICATED', 'the worker key is not valid');
    return credentialId;
  }

  /**
   * Before each round of a stream: is its key still valid (revocation at once)? Checked through the
   * credential caches, charging nothing (the stream's requests are charged as they come). Other tokens
   * (an execution token, which dies with its attempt) are checked when the stream opens.
   */
  async function recheckStream(metadata: Metadata): Promise<void> {
    const token = bearerOf(metadata);
    if (token?.startsWith('tdpw_')) await workerCredential(token);
    else if (token?.startsWith('tdp_')) await deps.callers.callerOf(token, 'Reporting/Report');
  }

  const server = new Server();
  server.addService(service, {
    ReportEvent: reportEvent,
    Heartbeat: heartbeat,
    Report: ((call: ServerDuplexStream<never, object>) => {
      const stream: ReportStream = new ReportStream(
        {
          status: deps.status,
          workers: deps.workers,
          rateLimits: deps.rateLimits,
          logger: deps.logger,
          window: deps.streamWindow,
          maxBindings: deps.streamMaxBindings,
          roundSize: deps.streamRoundSize,
          recheck: () => recheckStream(call.metadata),
          jsonMaxDepth: deps.jsonMaxDepth,
        },
        call,
        streamCaller(call.metadata),
        () => streams.delete(stream),
      );
      streams.add(stream);
    }) as handleBidiStreamingCall<never, object>,
  });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync(`${listen.host}:${listen.port}`, ServerCredentials.createInsecure(), (error, bound) =>
      error ? reject(error) : resolve(bound),
    ),
  );

  return {
    port,
    close: async (graceMs) => {
      for (const stream of streams) stream.close();
      await new Promise<void>((resolve) => {
        const force = setTimeout(() => {
          server.forceShutdown();
          resolve();
        }, graceMs);
        server.tryShutdown(() => {
          clearTimeout(force);
          resolve();
        });
      });
    },
  };
}

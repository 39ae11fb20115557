import {
  CommandAcks,
  Labels,
  NoContent,
  WorkerEventsBatch,
  WorkerEventsBatchReply,
  WorkerHeartbeat,
  WorkerRegistered,
  WorkerRegistration,
} from '@tdp/protocol';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import type { GrantDeps } from '../../../core/grants/grants.ts';
import type { ApiKeyAuthenticator } from '../../../core/identity/authenticate.ts';
import { tenantReach } from '../../../core/identity/operatorAccess.ts';
import type { Revocations } from '../../../core/identity/ports.ts';
import { AppError } from '../../../core/shared/errors.ts';
import type { StatusDeps } from '../../../core/status/deps.ts';
import { type CommandHub, CommandStream } from '../../../core/workers/commands.ts';
import { type DrainWorkerDeps, drainWorkerSession } from '../../../core/workers/drainWorker.ts';
import {
  authenticateWorkerKey,
  issueWorkerKey,
  registerWorker,
  requireWorker,
  revokeWorkerKey,
  type WorkerDeps,
} from '../../../core/workers/workers.ts';
import { reportWorkerEvents } from '../reportCommands.ts';
import { bearerToken } from './auth.ts';
import { actorOfRequest, type OperatorAuthenticate, type OperatorGate } from './operatorAuth.ts';
import type { RateLimits } from './rateLimits.ts';
import { emptyBodyAsObject, eventStream, problemResponses, Uuid } from './schemas.ts';
import { logReportedEvents } from './taskLogs.ts';
import { inboundSpan, traceIdOf } from './tracing.ts';
import { registerWorkerGrantRoutes } from './workerGrantRoutes.ts';

export function registerWorkerRoutes(
  app: FastifyInstance,
  deps: {
    workers: WorkerDeps;
    /** Fails the session's open attempts its worker does not hold (leases.ts); how many. */
    releaseUnheld: (workerId: string, held: readonly string[]) => Promise<number>;
    workerDrain: DrainWorkerDeps;
    grants: GrantDeps;
    hub: CommandHub;
    /** The operators' gate, and who a bearer token names (the fleet list takes operators too). */
    operators: { gate: OperatorGate; bearer: OperatorAuthenticate };
    authenticator: ApiKeyAuthenticator;
    keepAliveMs: number;
    /** An unacknowledged command is sent again after this long. */
    resendAfterMs: number;
    /** How often an open stream reads its worker's open commands. */
    commandPollIntervalMs: number;
    /** The attempt inbox records a worker's events through the status service. */
    inbox: StatusDeps;
    /** Each request with a worker key is charged to the key's bucket. */
    rateLimits: RateLimits;
    /** The gRPC reporting port registration announces (null: off). */
    grpcPort: number | null;
    /** A revoked worker key is told to every replica, whose command streams of it end. */
    revocations: Pick<Revocations, 'announce' | 'subscribe'>;
  },
): void {
  const tags = ['workers'];
  const security = [{ workerKey: [] }];
  // Open command streams end when the server shuts down (they would otherwise hold it open).
  const streams = new Set<import('node:http').ServerResponse>();
  app.addHook('preClose', async () => {
    for (const stream of streams) stream.end();
  });
  // The open streams by worker key: a revoked key's end at once (its next request is 401).
  const streamsOfKey = new Map<string, Set<import('node:http').ServerResponse>>();
  deps.revocations.subscribe((revocation) => {
    if (revocation.kind !== 'workerKey') return;
    for (const stream of streamsOfKey.get(revocation.keyId) ?? []) stream.end();
  });

  async function workerCredential(request: FastifyRequest): Promise<string> {
    const token = bearerToken(request);
    const id = token ? await authenticateWorkerKey(deps.workers, token) : null;
    if (!id) throw new AppError('UNAUTHENTICATED', 'send a worker key as "Authorization: Bearer tdpw_…"');
    deps.rateLimits.charge('worker', id);
    return id;
  }

  app.post<{ Body: { label?: string } }>(
    '/admin/v1/worker-credentials',
    {
      onRequest: deps.operators.gate('admin', 'platform'),
      preValidation: emptyBodyAsObject,
      schema: {
        tags: ['admin'],
        security: [{ adminToken: [] }],
        summary: 'Issue a worker key (platform-wide admin) (shown once)',
        body: Type.Object(
          { label: Type.Optional(Type.String({ maxLength: 200 })) },
          { additionalProperties: false },
        ),
        response: { 201: Type.Object({ id: Type.String(), key: Type.String() }), ...problemResponses },
      },
    },
    async (request, reply) =>
      reply.code(201).send(await issueWorkerKey(deps.workers, request.body.label ?? null)),
  );

  app.delete<{ Params: { id: string } }>(
    '/admin/v1/worker-credentials/:id',
    {
      onRequest: deps.operators.gate('admin', 'platform'),
      schema: {
        tags: ['admin'],
        security: [{ adminToken: [] }],
        summary: 'Revoke a worker key now (platform-wide admin)',
        description:
          "Every replica forgets it at once: the key's command streams end and its next request is 401.",
        params: Type.Object({ id: Type.String({ minLength: 1, maxLength: 64 }) }),
        response: { 204: Type.Null(), ...problemResponses },
      },
    },
    async (request, reply) => {
      await revokeWorkerKey(deps.workers, request.params.id);
      await deps.revocations.announce({ kind: 'workerKey', keyId: request.params.id });
      return reply.code(204).send();
    },
  );

  app.put<{
    Params: { id: string };
    Body: {
      labels?: Record<string, string>;
      group?: string | null;
      weight?: number;
    };
  }>(
    '/admin/v1/nodes/:id',
    {
      onRequest: deps.operators.gate('admin', 'platform'),
      schema: {
        tags: ['admin'],
        security: [{ adminToken: [] }],
        summary: "Set a node's trusted labels, group or weight (platform-wide admin)",
        description:
          'Its management status is changed only by `:cordon`, `:uncordon` and `:drain`, each with a reason and audited; a body with `status` is refused.',
        params: Type.Object({ id: Type.String({ minLength: 1, maxLength: 200 }) }),
        body: Type.Object(
          {
            labels: Type.Optional(Labels),
            group: Type.Optional(Type.Union([Type.String({ maxLength: 200 }), Type.Null()])),
            weight: Type.Optional(Type.Integer({ minimum: 0, maximum: 1000 })),
          },
          { additionalProperties: false },
        ),
        response: { 204: Type.Null(), ...problemResponses },
      },
    },
    async (request, reply) => {
      await deps.workers.workers.upsertNode(
        { id: request.params.id, ...request.body },
        deps.workers.clock.now(),
      );
      deps.workers.workersChanged();
      return reply.code(204).send();
    },
  );

  app.post<{ Params: { id: string }; Body: { reason: string } }>(
    '/admin/v1/workers/:id(^[0-9a-fA-F-]{36})::drain',
    {
      onRequest: deps.operators.gate('operator', 'platform'),
      preValidation: emptyBodyAsObject,
      schema: {
        tags: ['admin'],
        security: [{ adminToken: [] }],
        summary: 'Drain a worker session, with a reason (platform-wide operator; audited)',
        description:
          'The session is placed on no more and gets a DRAIN command: the worker finishes its running attempts, takes nothing new and exits. The reason is kept in the operator audit with the action.',
        params: Type.Object({ id: Uuid }),
        body: Type.Object(
          { reason: Type.String({ minLength: 1, maxLength: 2000 }) },
          { additionalProperties: false },
        ),
        response: {
          202: Type.Object({ workerId: Type.String(), commandId: Type.String(), auditId: Type.String() }),
          ...problemResponses,
        },
      },
    },
    async (request, reply) =>
      reply.code(202).send(
        await drainWorkerSession(deps.workerDrain, {
          workerId: request.params.id,
          reason: request.body.reason,
          actor: actorOfRequest(request),
        }),
      ),
  );

  app.post<{ Body: WorkerRegistration }>(
    '/v1/workers/register',
    {
      schema: {
        tags,
        security,
        summary: 'Register a worker session',
        body: WorkerRegistration,
        response: {
          201: WorkerRegistered,
          ...problemResponses,
        },
      },
    },
    async (request, reply) =>
      reply.code(201).send({
        ...(await registerWorker(deps.workers, await workerCredential(request), request.body)),
        ...(deps.grpcPort !== null ? { grpcPort: deps.grpcPort } : {}),
      }),
  );

  app.post<{ Params: { id: string }; Body: WorkerHeartbeat }>(
    '/v1/workers/:id/heartbeat',
    {
      preValidation: emptyBodyAsObject,
      schema: {
        tags,
        security,
        summary: 'Worker heartbeat (and runtime state)',
        params: Type.Object({ id: Uuid }),
        body: WorkerHeartbeat,
        response: { 204: NoContent, ...problemResponses },
      },
    },
    async (request, reply) => {
      await requireWorker(deps.workers, await workerCredential(request), request.params.id);
      const beat = await deps.workers.workers.heartbeat(
        request.params.id,
        deps.workers.clock.now(),
        request.body.runtimeState ?? null,
      );
      // Only a change of state changes where steps may go; every beat carries the state.
      if (beat.stateChanged) deps.workers.workersChanged();
      if (beat.live && request.body.heldAttempts)
        await deps.releaseUnheld(request.params.id, request.body.heldAttempts);
      return reply.code(204).send();
    },
  );

  app.get(
    '/v1/workers',
    {
      schema: {
        tags,
        security: [{ apiKey: [] }, { adminToken: [] }],
        summary:
          'Worker sessions with capabilities, labels, state and heartbeat age (API key or operator token)',
        description:
          "With an API key, only the workers that serve the key's tenant: those offering a capability (name and version) that a step of one of its published workflows runs. An operator sees the workers serving the tenants they reach; a platform-wide one, the whole fleet.",
        response: {
          200: Type.Array(
            Type.Object(
              { id: Type.String(), name: Type.String(), nodeId: Type.String() },
              { additionalProperties: true },
            ),
          ),
        },
      },
    },
    async (request) => {
      const token = bearerToken(request);
      const operator = await deps.operators.bearer(request);
      if (operator) {
        const reach = tenantReach(operator, 'viewer');
        // A tenant's operator sees the workers that can run their tenants' steps, as its applications do.
        return listWorkerViews(deps.workers, reach === 'all' ? {} : { servingTenants: reach });
      }
      const principal = token ? await deps.authenticator.authenticate(token) : null;
      if (!principal) throw new AppError('UNAUTHENTICATED', 'send an API key or an operator token');
      // The fleet is the operator's: an application sees the workers that can run its tenant's steps.
      return listWorkerViews(deps.workers, { servingTenants: [principal.tenantId] });
    },
  );

  app.get<{ Params: { id: string } }>(
    '/v1/workers/:id/commands',
    {
      schema: {
        tags,
        security,
        summary:
          'The command stream (SSE): every unacknowledged command on connect, then new ones; each repeats until acknowledged',
        params: Type.Object({ id: Uuid }),
        response: { 200: eventStream },
      },
    },
    async (request, reply) => {
      const credentialId = await workerCredential(request);
      await requireWorker(deps.workers, credentialId, request.params.id);
      const workerId = request.params.id;
      reply.hijack();
      const raw = reply.raw;
      raw.writeHead(200, {
        'content-type': 'text/event-stream',
        'cache-control': 'no-cache',
        connection: 'keep-alive',
        'x-accel-buffering': 'no',
      });
      // Commands of one turn of the event loop (e.g. several creates committing together) go out in
      // one socket write: each write is a system call, and those are what a busy server spends on.
      let closed = false;
      let unwritten: string[] = [];
      const writeOut = () => {
        const text = unwritten.join('');
        unwritten = [];
        if (!closed) raw.write(text);
      };
      const stream = new CommandStream(
        {
          store: deps.workers.workers,
          hub: deps.hub,
          clock: deps.workers.clock,
          resendAfterMs: deps.resendAfterMs,
          pollIntervalMs: deps.commandPollIntervalMs,
        },
        workerId,
        (command) => {
          if (unwritten.length === 0) setImmediate(writeOut);
          unwritten.push(
            `id: ${command.id}\nevent: ${command.type}\ndata: ${JSON.stringify({ commandId: command.id, type: command.type, ...command.payload })}\n\n`,
          );
        },
        (error) => request.log.warn({ err: error, workerId }, 'command stream flush failed'),
      );
      const keepAlive = setInterval(() => raw.write(': keep-alive\n\n'), deps.keepAliveMs);
      streams.add(raw);
      const ofKey = streamsOfKey.get(credentialId) ?? new Set();
      streamsOfKey.set(credentialId, ofKey.add(raw));
      raw.on('close', () => {
        streams.delete(raw);
        ofKey.delete(raw);
        if (ofKey.size === 0 && streamsOfKey.get(credentialId) === ofKey) streamsOfKey.delete(credentialId);
        closed = true;
        stream.close();
        clearInterval(keepAlive);
      });
      raw.write(': connected\n\n');
      stream.start();
    },
  );

  app.post<{ Params: { id: string; commandId: string } }>(
    '/v1/workers/:id/commands/:commandId(^[0-9a-fA-F-]{36})::ack',
    {
      schema: {
        tags,
        security,
        summary: 'Acknowledge a command (it stops being re-sent)',
        params: Type.Object({ id: Uuid, commandId: Uuid }),
        response: { 204: Type.Null(), ...problemResponses },
      },
    },
    async (request, reply) => {
      await requireWorker(deps.workers, await workerCredential(request), request.params.id);
      if (
        !(await deps.workers.workers.ackCommand(
          request.params.id,
          request.params.commandId,
          deps.workers.clock.now(),
        ))
      ) {
        throw new AppError('VALIDATION_FAILED', `command ${request.params.commandId} is not this worker's`);
      }
      return reply.code(204).send();
    },
  );

  app.post<{ Params: { id: string }; Body: CommandAcks }>(
    '/v1/workers/:id/commands::ack',
    {
      schema: {
        tags,
        security,
        summary: "Acknowledge many commands at once; all of them or, if one is not this worker's, none",
        params: Type.Object({ id: Uuid }),
        body: CommandAcks,
        response: { 204: NoContent, ...problemResponses },
      },
    },
    async (request, reply) => {
      await requireWorker(deps.workers, await workerCredential(request), request.params.id);
      const unknown = await deps.workers.workers.ackCommands(
        request.params.id,
        request.body.commandIds,
        deps.workers.clock.now(),
      );
      if (unknown.length > 0) {
        throw new AppError(
          'VALIDATION_FAILED',
          `commands ${unknown.join(', ')} are not this worker's; nothing was acknowledged`,
        );
      }
      return reply.code(204).send();
    },
  );

  app.post<{ Params: { id: string }; Body: WorkerEventsBatch }>(
    '/v1/workers/:id/events::batch',
    {
      schema: {
        tags,
        security,
        summary:
          "The attempt inbox: the worker's events, a result per item (and command acknowledgements, in the same commit)",
        params: Type.Object({ id: Uuid }),
        body: WorkerEventsBatch,
        response: { 200: WorkerEventsBatchReply },
      },
    },
    async (request) => {
      const worker = await requireWorker(
        deps.workers,
        await workerCredential(request),
        request.params.id,
        true,
      );
      const { events, commandAcks = [] } = request.body;
      if (events.length === 0 && commandAcks.length === 0) {
        throw new AppError('VALIDATION_FAILED', 'send at least one event or command acknowledgement');
      }
      const results = await inboundSpan(
        deps.inbox.tracing,
        'POST /v1/workers/{id}/events:batch',
        request,
        async () => {
          const outcomes = await reportWorkerEvents(deps.inbox, worker, events, commandAcks);
          logReportedEvents(request.log, traceIdOf(deps.inbox.tracing), events, outcomes);
          return outcomes;
        },
      );
      return { results };
    },
  );

  registerWorkerGrantRoutes(app, { grants: deps.grants, workerCredential, tags, security });
}

/** Worker sessions as `GET /v1/workers` and the dashboard show them, with their heartbeat age. */
export async function listWorkerViews(deps: WorkerDeps, filter: { servingTenants?: string[] } = {}) {
  const now = deps.clock.now().getTime();
  return (await deps.workers.listWorkers(filter)).map((w) => ({
    id: w.id,
    name: w.name,
    instanceId: w.instanceId,
    nodeId: w.nodeId,
    nodeStatus: w.nodeStatus,
    labels: w.nodeLabels,
    claimedLabels: w.claimedLabels,
    capabilities: w.capabilities,
    resources: w.resources,
    runtimeState: w.runtimeState,
    schedulingStatus: w.schedulingStatus,
    runningAttempts: w.runningAttempts,
    maxConcurrency: w.maxConcurrency,
    heartbeatAgeMs: now - w.lastHeartbeatAt.getTime(),
  }));
}

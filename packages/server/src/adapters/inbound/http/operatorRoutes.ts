/**
 * The operator's actions on nodes and worker sessions beside the session drain (workerRoutes.ts): node
 * drain, cordon and uncordon. A platform-wide operator; every action takes a reason and is audited
 * (auditRoutes.ts reads the audit).
 */
import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import {
  drainNode,
  type OperatorActionDeps,
  setNodeCordon,
  setWorkerCordon,
} from '../../../core/workers/operatorActions.ts';
import { actorOfRequest, type OperatorGate } from './operatorAuth.ts';
import { emptyBodyAsObject, problemResponses, Uuid } from './schemas.ts';

const Reason = Type.Object(
  { reason: Type.String({ minLength: 1, maxLength: 2000 }) },
  { additionalProperties: false },
);
const NodeId = Type.Object({ id: Type.String({ minLength: 1, maxLength: 200 }) });
const WorkerId = Type.Object({ id: Uuid });
const admin = { tags: ['admin'], security: [{ adminToken: [] }] };

export function registerOperatorRoutes(
  app: FastifyInstance,
  deps: { gate: OperatorGate; actions: OperatorActionDeps },
): void {
  // Nodes and worker sessions serve every tenant: only a platform-wide operator moves them.
  const onRequest = deps.gate('operator', 'platform');

  app.post<{ Params: { id: string }; Body: { reason: string } }>(
    '/admin/v1/nodes/:id(^[^/]+?)::drain',
    {
      onRequest,
      preValidation: emptyBodyAsObject,
      schema: {
        ...admin,
        summary: 'Drain a node: cordon it and drain each of its worker sessions, with a reason (audited)',
        description:
          'The node is CORDONED (placed on no more, even by a session that registers later) and each live session on it gets a DRAIN command: it finishes its running attempts, takes nothing new and exits. Draining a drained node again answers the same and writes nothing, unless a session is left to drain.',
        params: NodeId,
        body: Reason,
        response: {
          202: Type.Object({
            nodeId: Type.String(),
            auditId: Type.String(),
            workers: Type.Array(Type.Object({ workerId: Type.String(), commandId: Type.String() })),
          }),
          ...problemResponses,
        },
      },
    },
    async (request, reply) =>
      reply.code(202).send(
        await drainNode(deps.actions, {
          nodeId: request.params.id,
          reason: request.body.reason,
          actor: actorOfRequest(request),
        }),
      ),
  );

  for (const cordoned of [true, false]) {
    const verb = cordoned ? 'cordon' : 'uncordon';
    app.post<{ Params: { id: string }; Body: { reason: string } }>(
      `/admin/v1/workers/:id(^[0-9a-fA-F-]{36})::${verb}`,
      {
        onRequest,
        preValidation: emptyBodyAsObject,
        schema: {
          ...admin,
          summary: cordoned
            ? 'Cordon a worker session: placed on no more, its running work goes on (audited)'
            : 'Uncordon a worker session: placeable again (audited)',
          params: WorkerId,
          body: Reason,
          response: {
            200: Type.Object({
              workerId: Type.String(),
              schedulingStatus: Type.Union([Type.Literal('ELIGIBLE'), Type.Literal('INELIGIBLE')]),
              auditId: Type.String(),
            }),
            ...problemResponses,
          },
        },
      },
      async (request) =>
        setWorkerCordon(deps.actions, {
          workerId: request.params.id,
          cordoned,
          reason: request.body.reason,
          actor: actorOfRequest(request),
        }),
    );
    app.post<{ Params: { id: string }; Body: { reason: string } }>(
      `/admin/v1/nodes/:id(^[^/]+?)::${verb}`,
      {
        onRequest,
        preValidation: emptyBodyAsObject,
        schema: {
          ...admin,
          summary: cordoned
            ? 'Cordon a node: none of its sessions is placed on, the running work goes on (audited)'
            : 'Uncordon a node: its sessions are placeable again; a drained one stays DRAINING (audited)',
          params: NodeId,
          body: Reason,
          response: {
            200: Type.Object({
              nodeId: Type.String(),
              status: Type.Union([Type.Literal('ACTIVE'), Type.Literal('CORDONED')]),
              auditId: Type.String(),
            }),
            ...problemResponses,
          },
        },
      },
      async (request) =>
        setNodeCordon(deps.actions, {
          nodeId: request.params.id,
          cordoned,
          reason: request.body.reason,
          actor: actorOfRequest(request),
        }),
    );
  }
}

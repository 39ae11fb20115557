/**
 * Decisions on approval steps (docs/step-kinds.md#approval): a user's, with a user token, and the
 * operator's, with the admin token and a reason. Both need an Idempotency-Key; its retry gets the first
 * answer (200, `idempotent-replayed: true`).
 */
import { DecisionRequest, OperatorDecisionRequest, StepDecisionView } from '@tdp/protocol';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import {
  type ApprovalDeps,
  type DecidingParty,
  decideApproval,
} from '../../../core/orchestration/kinds/approval.ts';
import { actorOfRequest, type OperatorGate, requireTaskRole } from './operatorAuth.ts';
import { problem, requireIdempotencyKey, sendProblem } from './problems.ts';
import { emptyBodyAsObject, IdempotencyKeyHeader, problemResponses, Uuid } from './schemas.ts';
import type { StatusCallers } from './statusRouteContext.ts';

const StepParams = Type.Object({ id: Uuid, key: Type.String({ minLength: 1, maxLength: 100 }) });
const actions = { approve: 'APPROVE', reject: 'REJECT' } as const;

type DecisionRoute = {
  Params: { id: string; key: string };
  Headers: { 'idempotency-key'?: string };
  Body: DecisionRequest & { reason?: string };
};

async function decide(
  deps: ApprovalDeps,
  party: DecidingParty,
  request: FastifyRequest<DecisionRoute>,
  reply: FastifyReply,
  decision: 'APPROVE' | 'REJECT',
) {
  const result = await decideApproval(deps, party, {
    taskId: request.params.id,
    stepKey: request.params.key,
    decision,
    comment: request.body.comment,
    data: request.body.data,
    idempotencyKey: request.headers['idempotency-key']!,
  });
  if (result.replayed) reply.header('idempotent-replayed', 'true');
  return reply.code(result.replayed ? 200 : 201).send(result.view);
}

const description =
  'Records your decision on a waiting approval step: enough approvals and the step succeeds with ' +
  '`{ decisions }`; a rejection fails it `APPROVAL_REJECTED`. A step that is not waiting is 409 ' +
  'STEP_NOT_WAITING, after its timeout 409 APPROVAL_TIMED_OUT, a second different decision 409 ' +
  'DECISION_CONFLICT, someone who is not an approver 403 NOT_AN_APPROVER, data that fails the form schema ' +
  '422 DECISION_DATA_INVALID. Requires `Idempotency-Key`: a retry returns the first answer (200).';

/** `POST /v1/tasks/{id}/steps/{key}:approve` and `:reject`, with a user token. */
export function registerApprovalRoutes(
  app: FastifyInstance,
  deps: { approvals: ApprovalDeps },
  callers: StatusCallers,
): void {
  for (const [action, decision] of Object.entries(actions)) {
    app.post<DecisionRoute>(
      `/v1/tasks/:id(^[0-9a-fA-F-]{36})/steps/:key(^[A-Za-z0-9_.-]+)::${action}`,
      {
        preValidation: [emptyBodyAsObject, requireIdempotencyKey],
        schema: {
          tags: ['tasks'],
          summary: `${action === 'approve' ? 'Approve' : 'Reject'} a waiting approval step (user token)`,
          description,
          security: [{ userToken: [] }],
          params: StepParams,
          headers: IdempotencyKeyHeader,
          body: DecisionRequest,
          response: { 200: StepDecisionView, 201: StepDecisionView, ...problemResponses },
        },
      },
      async (request, reply) => {
        const who = await callers.caller(request);
        if (who?.kind !== 'user')
          return sendProblem(
            reply.header('www-authenticate', 'Bearer'),
            problem('UNAUTHENTICATED', 'send a user token (POST /v1/user-tokens)', undefined, request.url),
          );
        const { viewer } = who.principal;
        return decide(
          deps.approvals,
          {
            decider: { kind: 'user', userId: viewer.userId, roles: viewer.roles, projects: viewer.projects },
            reach: who.principal,
          },
          request,
          reply,
          decision,
        );
      },
    );
  }
}

/** The operator's approve and reject (admin token, with a reason kept with the decision). */
export function registerOperatorApprovalRoutes(
  app: FastifyInstance,
  deps: {
    gate: OperatorGate;
    taskTenant: (taskId: string) => Promise<string | null>;
    approvals: ApprovalDeps;
  },
): void {
  const onRequest = deps.gate('operator', 'tenants');
  for (const [action, decision] of Object.entries(actions)) {
    app.post<DecisionRoute>(
      `/admin/v1/tasks/:id(^[0-9a-fA-F-]{36})/steps/:key(^[A-Za-z0-9_.-]+)::${action}`,
      {
        onRequest,
        preValidation: [emptyBodyAsObject, requireIdempotencyKey],
        schema: {
          tags: ['admin'],
          summary: `${action === 'approve' ? 'Approve' : 'Reject'} a waiting approval step as the operator, with a reason`,
          description: `${description} The reason is kept with the decision (\`decidedBy: "operator"\`) with the operator's name, shown in the timeline, and audited. Needs the operator role for the task's tenant.`,
          security: [{ adminToken: [] }],
          params: StepParams,
          headers: IdempotencyKeyHeader,
          body: OperatorDecisionRequest,
          response: { 200: StepDecisionView, 201: StepDecisionView, ...problemResponses },
        },
      },
      async (request, reply) => {
        await requireTaskRole(request, 'operator', request.params.id, deps.taskTenant);
        return decide(
          deps.approvals,
          {
            decider: { kind: 'operator', reason: request.body.reason!, actor: actorOfRequest(request) },
            reach: null,
          },
          request,
          reply,
          decision,
        );
      },
    );
  }
}

/** Workflows and their steps: create a workflow, read it, add tasks, activate and register steps. */
import {
  CreateWorkflowRequest,
  ExecutionContext,
  NewStatusTask,
  RegisterExecutionRequest,
  TaskSummary,
  WorkflowCreated,
} from '@tdp/protocol';
import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import { AppError } from '../../../core/shared/errors.ts';
import { activateStep, registerExecution } from '../../../core/status/executions.ts';
import { workflowView } from '../../../core/status/reads.ts';
import { addWorkflowTask, createWorkflow } from '../../../core/status/workflows.ts';
import { emptyBodyAsObject, problemResponses, Uuid } from './schemas.ts';
import {
  type StatusCallers,
  type StatusRouteDeps,
  security,
  tags,
  unauthenticated,
} from './statusRouteContext.ts';

export function registerWorkflowRoutes(
  app: FastifyInstance,
  deps: StatusRouteDeps,
  { caller, application, reader }: StatusCallers,
): void {
  app.post<{ Body: CreateWorkflowRequest }>(
    '/v1/workflows',
    {
      schema: {
        tags,
        security,
        summary: 'Create a workflow with its first tasks and known steps (idempotent by clientWorkflowKey)',
        body: CreateWorkflowRequest,
        response: { 200: WorkflowCreated, 201: WorkflowCreated, ...problemResponses },
      },
    },
    async (request, reply) => {
      const result = await createWorkflow(deps.status, await application(request), request.body);
      return reply.code(result.created ? 201 : 200).send(result);
    },
  );

  app.get<{ Params: { id: string } }>(
    '/v1/workflows/:id',
    {
      schema: {
        tags,
        security,
        summary: 'A workflow with the task summaries its reader may see',
        params: Type.Object({ id: Uuid }),
        response: {
          200: Type.Object({
            workflow: Type.Record(Type.String(), Type.Unknown()),
            tasks: Type.Array(TaskSummary),
          }),
          ...problemResponses,
        },
      },
    },
    async (request) => workflowView(deps.reads, await reader(request), request.params.id),
  );

  app.post<{ Params: { id: string }; Body: NewStatusTask }>(
    '/v1/workflows/:id/tasks',
    {
      schema: {
        tags,
        security,
        summary: 'Add a task to a workflow (idempotent by clientTaskKey)',
        params: Type.Object({ id: Uuid }),
        body: NewStatusTask,
        response: {
          200: Type.Object({
            taskId: Type.String(),
            taskVersion: Type.String(),
            workflowVersion: Type.String(),
            created: Type.Boolean(),
          }),
          201: Type.Object({
            taskId: Type.String(),
            taskVersion: Type.String(),
            workflowVersion: Type.String(),
            created: Type.Boolean(),
          }),
          ...problemResponses,
        },
      },
    },
    async (request, reply) => {
      const result = await addWorkflowTask(
        deps.status,
        await application(request),
        request.params.id,
        request.body,
      );
      return reply.code(result.created ? 201 : 200).send(result);
    },
  );

  app.post<{ Params: { taskId: string; stepId: string }; Body: { attempt?: number } }>(
    '/v1/tasks/:taskId/steps/:stepId(^[A-Za-z0-9][A-Za-z0-9._:-]*?)::activate',
    {
      preValidation: emptyBodyAsObject,
      schema: {
        tags,
        security,
        summary: 'Activate a known step: returns its execution context (coordinator)',
        params: Type.Object({ taskId: Uuid, stepId: Type.String() }),
        body: Type.Object(
          { attempt: Type.Optional(Type.Integer({ minimum: 1 })) },
          { additionalProperties: false },
        ),
        response: { 200: ExecutionContext, 201: ExecutionContext, ...problemResponses },
      },
    },
    async (request, reply) => {
      const context = await activateStep(
        deps.status,
        await application(request),
        request.params.taskId,
        request.params.stepId,
        request.body.attempt,
      );
      return reply.code(context.created ? 201 : 200).send(context);
    },
  );

  app.post<{ Params: { id: string }; Body: RegisterExecutionRequest }>(
    '/v1/tasks/:id/executions::register',
    {
      schema: {
        tags,
        security,
        summary: 'Register a dynamic step (coordinator key, or the parent execution token)',
        params: Type.Object({ id: Uuid }),
        body: RegisterExecutionRequest,
        response: { 200: ExecutionContext, 201: ExecutionContext, ...problemResponses },
      },
    },
    async (request, reply) => {
      const who = await caller(request);
      let context: ExecutionContext;
      if (who?.kind === 'application') {
        context = await registerExecution(
          deps.status,
          { kind: 'coordinator', principal: who.principal },
          request.params.id,
          request.body,
        );
      } else if (who?.kind === 'token') {
        const claims = await deps.status.credentials.verify(who.token, deps.status.clock.now());
        if (!claims)
          throw new AppError('EXECUTION_CREDENTIAL_INVALID', 'the execution token is invalid or expired');
        context = await registerExecution(
          deps.status,
          { kind: 'parent', claims },
          request.params.id,
          request.body,
        );
      } else {
        throw unauthenticated(request, 'send the coordinator API key or the parent execution token');
      }
      return reply.code(context.created ? 201 : 200).send(context);
    },
  );
}

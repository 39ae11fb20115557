/**
 * The status API, by the surface its routes serve: workflows and their steps (workflowRoutes), what
 * workers report (eventReportRoutes), and a task's reads and access (taskStatusRoutes). Registered in
 * that order, the order of the API's documentation; then decisions on approval steps (approvalRoutes).
 */
import type { FastifyInstance } from 'fastify';
import { registerApprovalRoutes } from './approvalRoutes.ts';
import { registerEventReportRoutes } from './eventReportRoutes.ts';
import { type StatusRouteDeps, statusCallers } from './statusRouteContext.ts';
import { registerTaskStatusRoutes } from './taskStatusRoutes.ts';
import { registerWorkflowRoutes } from './workflowRoutes.ts';

export function registerStatusRoutes(app: FastifyInstance, deps: StatusRouteDeps): void {
  const callers = statusCallers(deps);
  registerWorkflowRoutes(app, deps, callers);
  registerEventReportRoutes(app, deps, callers);
  registerTaskStatusRoutes(app, deps, callers);
  registerApprovalRoutes(app, { approvals: deps.status }, callers);
}

/**
 * The owner's decision on an approve-before-publish order: the demo app asks TDP, as that person (a
 * user token), to approve or reject the task's `approve` step. The key is the order's, so a retried
 * click gets TDP's first answer and a change of mind afterwards is refused. The order itself moves by
 * TDP's callbacks: SUCCEEDED (then the app publishes the result) or REJECTED.
 */
import { TdpApiError } from '@tdp/sdk';
import type { TdpPort } from './sender.ts';
import { addEvent, findOrder } from './store.ts';
import { type DemoDeps, DemoError } from './useCases.ts';

/** The approval step of the approve-before-publish workflows (setup.ts). */
export const approvalStepKey = 'approve';

/**
 * What TDP says now about an approve-before-publish order's task, for a page that has not seen it live
 * (just loaded): its version, lifecycle and business status (`WAITING_USER_ACTION` while it waits).
 */
export async function approvalState(deps: DemoDeps, tdp: TdpPort, ownerId: string, orderId: string) {
  const order = await findOrder(deps.sql, orderId);
  if (!order || order.owner_id !== ownerId) throw new DemoError(404, 'ORDER_NOT_FOUND', 'no such order');
  if (!order.approve_before_publish || !order.task_id)
    return { taskVersion: null, lifecycleStatus: null, businessStatus: null };
  const view = await tdp.client.getTask(order.task_id);
  return {
    taskVersion: view.task.version,
    lifecycleStatus: view.task.lifecycleStatus,
    businessStatus: view.task.businessStatus,
  };
}

export async function decideOrder(
  deps: DemoDeps,
  tdp: TdpPort,
  ownerId: string,
  orderId: string,
  decision: 'approve' | 'reject',
): Promise<{ outcome: string }> {
  const order = await findOrder(deps.sql, orderId);
  if (!order || order.owner_id !== ownerId) throw new DemoError(404, 'ORDER_NOT_FOUND', 'no such order');
  if (!order.approve_before_publish || !order.task_id)
    throw new DemoError(409, 'NOTHING_TO_APPROVE', 'this order does not wait for an approval');
  try {
    const options = { asUser: ownerId, idempotencyKey: `demo-decision-${order.id}` };
    const answer =
      decision === 'approve'
        ? await tdp.client.approveStep(order.task_id, approvalStepKey, options)
        : await tdp.client.rejectStep(order.task_id, approvalStepKey, options);
    await addEvent(
      deps.sql,
      order.id,
      deps.now(),
      decision === 'approve' ? 'APPROVED_BY_OWNER' : 'REJECTED_BY_OWNER',
    );
    return { outcome: answer.outcome };
  } catch (error) {
    // TDP's refusal (not waiting yet, decided already, another decision) is the person's answer.
    if (error instanceof TdpApiError && error.status < 500)
      throw new DemoError(409, error.code, error.detail);
    throw error;
  }
}

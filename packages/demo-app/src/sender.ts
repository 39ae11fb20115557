/**
 * The demo app's two conversations with TDP that are not callbacks: the command sender (the outbox's
 * SUBMIT and CANCEL rows, sent after commit until TDP answers) and the reconciler (orders that waited too
 * long are compared with what TDP says).
 */
import { TdpApiError, type TdpClient } from '@tdp/sdk';
import type { Sql } from './database.ts';
import { reconcileOrder } from './orders.ts';
import { addEvent, type CommandRow, lockOrder, type OrderRow, projectionOf, saveOrder } from './store.ts';
import { type DemoDeps, resultArchive } from './useCases.ts';

export interface TdpPort {
  /** The app's backend client (`@tdp/sdk`, its API key); it decides approvals as the owner (`asUser`). */
  client: TdpClient;
  /** Where TDP posts this app's callbacks. */
  callbackUrl: string;
  workflows: { cleanOnly: string; cleanThenWatermark: string; version: string };
}

/** The workflow an order runs: its mode's, in the variant that waits for approval when asked. */
export function workflowFor(
  workflows: TdpPort['workflows'],
  order: Pick<OrderRow, 'processing_mode' | 'approve_before_publish'>,
): string {
  const name =
    order.processing_mode === 'ARCHIVE_CLEAN_ONLY' ? workflows.cleanOnly : workflows.cleanThenWatermark;
  return order.approve_before_publish ? `${name}${approveFirstSuffix}` : name;
}

/** The approve-before-publish variant of each workflow is published under its name with this suffix. */
export const approveFirstSuffix = '-approve-first';

/** The key TDP deduplicates a submit by: one task per order, whatever the number of tries. */
export const submitKey = (orderId: string) => `demo-order-${orderId}`;

const claimSeconds = 30;

/** Claims due commands by pushing their time forward (a sender that dies lets them come back). */
async function claimDue(sql: Sql, now: Date, limit: number): Promise<CommandRow[]> {
  return sql<CommandRow[]>`
    WITH due AS (
      SELECT id FROM demo.command_outbox
      WHERE status = 'PENDING' AND available_at <= ${now}
      ORDER BY available_at LIMIT ${limit} FOR UPDATE SKIP LOCKED
    )
    UPDATE demo.command_outbox c
    SET available_at = ${new Date(now.getTime() + claimSeconds * 1000)}, attempts = c.attempts + 1
    FROM due WHERE c.id = due.id
    RETURNING c.id, c.order_id, c.command, c.attempts`;
}

const backoffMs = (attempts: number) =>
  Math.min(60_000, 500 * 2 ** Math.min(attempts, 10)) * (0.75 + Math.random() * 0.5);

/** A failure worth trying again: TDP unreachable, 5xx, 408 or 429. */
const retryable = (error: unknown) =>
  !(error instanceof TdpApiError) || error.retryable || error.status === 429;

export async function sendDueCommands(deps: DemoDeps, tdp: TdpPort, limit = 20): Promise<number> {
  const commands = await claimDue(deps.sql, deps.now(), limit);
  await Promise.all(commands.map((command) => send(deps, tdp, command)));
  return commands.length;
}

async function send(deps: DemoDeps, tdp: TdpPort, command: CommandRow): Promise<void> {
  const sql = deps.sql;
  const [order] = await sql<OrderRow[]>`SELECT * FROM demo.processing_order WHERE id = ${command.order_id}`;
  if (!order) return;
  const finish = async (status: 'SENT' | 'DEAD', error: string | null) => {
    await sql`UPDATE demo.command_outbox SET status = ${status}, sent_at = ${deps.now()}, last_error = ${error}
              WHERE id = ${command.id}`;
  };
  const retryLater = async (error: string, delayMs = backoffMs(command.attempts)) => {
    await sql`UPDATE demo.command_outbox SET available_at = ${new Date(deps.now().getTime() + delayMs)},
                last_error = ${error} WHERE id = ${command.id}`;
  };
  try {
    if (command.command === 'SUBMIT') {
      const created = await tdp.client.createTask(
        {
          workflowName: workflowFor(tdp.workflows, order),
          workflowVersion: tdp.workflows.version,
          name: order.name,
          externalRef: order.id,
          ownerId: order.owner_id,
          callbackUrl: tdp.callbackUrl,
          input: {
            source: order.source_asset_id,
            ...(order.watermark_text ? { text: order.watermark_text } : {}),
          },
        },
        { idempotencyKey: submitKey(order.id) },
      );
      await sql.begin(async (tx) => {
        const locked = (await lockOrder(tx, order.id))!;
        const at = deps.now();
        await saveOrder(tx, {
          ...locked,
          task_id: created.task.id,
          execution_id: locked.execution_id ?? created.execution.id,
          business_status: locked.business_status === 'SUBMITTING' ? 'SUBMITTED' : locked.business_status,
          updated_at: at,
        });
        await addEvent(tx, order.id, at, 'SUBMITTED_TO_TDP', { taskId: created.task.id });
        await tx`UPDATE demo.command_outbox SET status = 'SENT', sent_at = ${at}, last_error = NULL
                 WHERE id = ${command.id}`;
      });
      return;
    }
    // CANCEL: needs the task; until the submit is confirmed it waits (a failed submit has nothing to cancel).
    if (!order.task_id) {
      if (order.business_status === 'FAILED') return finish('SENT', 'nothing to cancel: the submit failed');
      return retryLater('waiting for the submit to be confirmed', 1_000);
    }
    await tdp.client.cancelTask(order.task_id, { reason: 'cancelled by the user' });
    await finish('SENT', null);
  } catch (error) {
    const message =
      error instanceof TdpApiError ? error.detail : error instanceof Error ? error.message : String(error);
    if (retryable(error)) return retryLater(message);
    // TDP refused for good. A finished task cannot be cancelled: nothing left to do.
    if (command.command === 'CANCEL') return finish('SENT', message);
    await sql.begin(async (tx) => {
      const locked = (await lockOrder(tx, order.id))!;
      const at = deps.now();
      await saveOrder(tx, {
        ...locked,
        business_status: 'FAILED',
        failure_code: error instanceof TdpApiError ? error.code : 'SUBMIT_REJECTED',
        failure_message: message,
        updated_at: at,
      });
      await addEvent(tx, order.id, at, 'SUBMIT_REJECTED', { message });
      await tx`UPDATE demo.command_outbox SET status = 'DEAD', sent_at = ${at}, last_error = ${message}
               WHERE id = ${command.id}`;
    });
    deps.log('TDP refused an order', { orderId: order.id, error: message });
  }
}

/**
 * Orders open for longer than `staleAfterMs` since their last change are compared with TDP's view of
 * their task, in case a callback is late or lost for good.
 */
export async function reconcileStaleOrders(
  deps: DemoDeps,
  tdp: TdpPort,
  staleAfterMs: number,
  limit = 50,
): Promise<number> {
  const before = new Date(deps.now().getTime() - staleAfterMs);
  const stale = await deps.sql<OrderRow[]>`
    SELECT * FROM demo.processing_order
    WHERE business_status NOT IN ('SUCCEEDED', 'FAILED', 'CANCELLED', 'REJECTED') AND task_id IS NOT NULL
      AND updated_at < ${before}
    ORDER BY updated_at LIMIT ${limit}`;
  let changed = 0;
  for (const order of stale) {
    const view = await tdp.client.getTask(order.task_id!).catch((error: unknown) => {
      deps.log('reconciler could not read a task', { orderId: order.id, error: String(error) });
      return null;
    });
    if (!view) continue;
    await deps.sql.begin(async (tx) => {
      const locked = (await lockOrder(tx, order.id))!;
      const at = deps.now();
      const next = reconcileOrder(projectionOf(locked), {
        executionId: view.execution.id,
        status: view.execution.status,
        progress: view.execution.progress,
        failureCode: view.task.failure?.code ?? null,
      });
      if (!next) {
        // Nothing new: look again only after another wait.
        await tx`UPDATE demo.processing_order SET updated_at = ${at} WHERE id = ${order.id}`;
        return;
      }
      changed += 1;
      const outputs = Object.fromEntries(view.execution.steps.map((s) => [s.key, s.data]));
      const failure = view.task.failure;
      await saveOrder(tx, {
        ...locked,
        business_status: next.status,
        progress: next.progress,
        execution_id: next.executionId,
        past_execution_ids: next.pastExecutionIds,
        last_sequence: next.lastSequence,
        result_asset_id: next.status === 'SUCCEEDED' ? resultArchive(outputs) : locked.result_asset_id,
        failure_code: ['FAILED', 'CANCELLED', 'REJECTED'].includes(next.status)
          ? (failure?.code ?? next.status)
          : null,
        failure_message: ['FAILED', 'CANCELLED', 'REJECTED'].includes(next.status)
          ? (failure?.userMessage ?? null)
          : null,
        published_at:
          next.status === 'SUCCEEDED' && locked.approve_before_publish
            ? (locked.published_at ?? at)
            : locked.published_at,
        updated_at: at,
      });
      await addEvent(tx, order.id, at, 'RECONCILED', { status: view.execution.status });
    });
  }
  return changed;
}

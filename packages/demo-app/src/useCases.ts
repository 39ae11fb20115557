/**
 * The demo app's use cases: uploading a ZIP, ordering its processing, cancelling, and taking in TDP's
 * callbacks. Each writes its rows in one transaction; talking to TDP happens in the sender and the
 * reconciler (sender.ts), never inside a transaction.
 */
import { randomUUID } from 'node:crypto';
import { verifySignature } from '@tdp/protocol';
import type { Sql } from './database.ts';
import type { FileStore } from './files.ts';
import { applyCallback, isFinal, validateOrder } from './orders.ts';
import {
  type AssetRow,
  addEvent,
  enqueueCommand,
  findAsset,
  lockOrder,
  type OrderRow,
  projectionOf,
  saveOrder,
} from './store.ts';

export interface DemoDeps {
  sql: Sql;
  files: FileStore;
  now: () => Date;
  /** The application's callback secret (TDP signs callbacks with it). */
  callbackSecret: () => string;
  applicationId: string;
  maxUploadBytes: number;
  /** Called after a commit that left a command to send. */
  wakeSender: () => void;
  log: (line: string, fields?: object) => void;
}

/** A refusal the HTTP layer turns into a problem+json answer. */
export class DemoError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly errors?: { field: string; code: string; message: string }[],
  ) {
    super(message);
    this.name = 'DemoError';
  }
}

export async function uploadAsset(
  deps: DemoDeps,
  ownerId: string,
  file: { fileName: string; mediaType: string; stream: NodeJS.ReadableStream },
): Promise<AssetRow> {
  if (!/\.zip$/i.test(file.fileName))
    throw new DemoError(415, 'NOT_A_ZIP', 'upload a .zip file (the file name must end in .zip)');
  const id = randomUUID();
  await deps.sql`
    INSERT INTO demo.asset (id, owner_id, kind, state, file_name, media_type, created_at)
    VALUES (${id}, ${ownerId}, 'SOURCE_ZIP', 'UPLOADING', ${file.fileName.slice(0, 255)}, ${file.mediaType}, ${deps.now()})`;
  const written = await deps.files.write(id, file.stream, deps.maxUploadBytes).catch(async (error) => {
    await deps.sql`DELETE FROM demo.asset WHERE id = ${id}`;
    if ((error as Error).name === 'TooLargeError')
      throw new DemoError(413, 'UPLOAD_TOO_LARGE', `the file is larger than ${deps.maxUploadBytes} bytes`);
    throw error;
  });
  const [ready] = await deps.sql<AssetRow[]>`
    UPDATE demo.asset SET state = 'READY', size_bytes = ${written.sizeBytes}, sha256 = ${written.sha256},
      ready_at = ${deps.now()}
    WHERE id = ${id} RETURNING *`;
  return ready!;
}

export interface OrderAnswer {
  status: 200 | 201;
  order: OrderRow;
}

/**
 * Saves the order and its SUBMIT command together (the order is SUBMITTING until TDP confirms). The
 * same idempotency key with the same request answers the first order; with another request, 409.
 */
export async function createOrder(
  deps: DemoDeps,
  ownerId: string,
  idempotencyKey: string,
  request: Record<string, unknown>,
): Promise<OrderAnswer> {
  const sourceId = typeof request.sourceAssetId === 'string' ? request.sourceAssetId : '';
  const asset = await findAsset(deps.sql, sourceId);
  const validation = validateOrder(request, asset && asset.owner_id === ownerId ? asset : null);
  const answer = await deps.sql.begin(async (tx) => {
    await tx`SELECT pg_advisory_xact_lock(hashtext(${`${ownerId}\n${idempotencyKey}`}))`;
    const [existing] = await tx<OrderRow[]>`
      SELECT * FROM demo.processing_order WHERE owner_id = ${ownerId} AND idempotency_key = ${idempotencyKey}`;
    if (existing) {
      if (validation.ok && existing.request_hash === validation.order.requestHash)
        return { status: 200 as const, order: existing };
      throw new DemoError(
        409,
        'IDEMPOTENCY_KEY_REUSED',
        'this Idempotency-Key was used for a different order; use a new key for a new order',
      );
    }
    if (!validation.ok)
      throw new DemoError(422, 'ORDER_INVALID', 'the order has invalid fields', validation.errors);
    const order = validation.order;
    const at = deps.now();
    const id = randomUUID();
    const [created] = await tx<OrderRow[]>`
      INSERT INTO demo.processing_order (id, owner_id, idempotency_key, request_hash, name, source_asset_id,
        processing_mode, watermark_text, approve_before_publish, business_status, created_at, updated_at)
      VALUES (${id}, ${ownerId}, ${idempotencyKey}, ${order.requestHash}, ${order.name}, ${order.sourceAssetId},
        ${order.processingMode}, ${order.watermarkText}, ${order.approveBeforePublish}, 'SUBMITTING', ${at}, ${at})
      RETURNING *`;
    await enqueueCommand(tx, randomUUID(), id, 'SUBMIT', at);
    await addEvent(tx, id, at, 'ORDER_CREATED', {
      processingMode: order.processingMode,
      ...(order.approveBeforePublish ? { approveBeforePublish: true } : {}),
    });
    return { status: 201 as const, order: created! };
  });
  if (answer.status === 201) deps.wakeSender();
  return answer;
}

/** Idempotent: a finished or already cancelling order is answered as it is. */
export async function cancelOrder(deps: DemoDeps, ownerId: string, orderId: string): Promise<OrderRow> {
  const order = await deps.sql.begin(async (tx) => {
    const order = await lockOrder(tx, orderId);
    if (!order || order.owner_id !== ownerId)
      throw new DemoError(404, 'ORDER_NOT_FOUND', `order ${orderId} does not exist`);
    if (isFinal(order.business_status) || order.cancel_requested_at) return order;
    const at = deps.now();
    const updated: OrderRow = {
      ...order,
      business_status: 'CANCELLING',
      cancel_requested_at: at,
      updated_at: at,
    };
    await saveOrder(tx, updated);
    await enqueueCommand(tx, randomUUID(), order.id, 'CANCEL', at);
    await addEvent(tx, order.id, at, 'CANCEL_REQUESTED');
    return updated;
  });
  deps.wakeSender();
  return order;
}

interface CallbackBody {
  specVersion: string;
  eventId: string;
  type: string;
  sequence: number;
  applicationId: string;
  taskId: string;
  executionId: string;
  externalRef: string | null;
  status: string;
  progress: number | null;
  data: {
    failure?: { code?: string; userMessage?: string | null } | null;
    outputs?: Record<string, unknown>;
  } | null;
  occurredAt: string;
}

const uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

function parseCallback(raw: string): CallbackBody {
  let body: Partial<CallbackBody>;
  try {
    body = JSON.parse(raw) as Partial<CallbackBody>;
  } catch {
    throw new DemoError(400, 'CALLBACK_MALFORMED', 'the callback body is not JSON');
  }
  const problems: string[] = [];
  // A minor version only adds or respells (1.1: CANCELLED); another major one would be another format.
  if (typeof body.specVersion !== 'string' || !/^1\.\d+$/.test(body.specVersion))
    problems.push('specVersion must be 1.x');
  for (const field of ['eventId', 'taskId', 'executionId', 'applicationId'] as const)
    if (typeof body[field] !== 'string' || !uuid.test(body[field] as string))
      problems.push(`${field} must be a UUID`);
  if (!Number.isSafeInteger(body.sequence) || (body.sequence as number) < 1)
    problems.push('sequence must be a positive integer');
  if (typeof body.type !== 'string' || typeof body.status !== 'string')
    problems.push('type and status must be text');
  if (
    body.progress != null &&
    (typeof body.progress !== 'number' || body.progress < 0 || body.progress > 100)
  )
    problems.push('progress must be 0–100');
  if (problems.length > 0) throw new DemoError(400, 'CALLBACK_MALFORMED', problems.join('; '));
  return body as CallbackBody;
}

/** Where an execution's final output archive is: the watermark step's, else the clean step's. */
export function resultArchive(outputs: Record<string, unknown> | undefined | null): string | null {
  for (const step of ['watermark', 'clean']) {
    const archive = (outputs?.[step] as { archive?: unknown } | undefined)?.archive;
    if (typeof archive === 'string') return archive;
  }
  return null;
}

export type CallbackResult = { duplicate: boolean; outcome: string };

/**
 * A TDP callback: signature checked (5 minutes of tolerance) against the exact bytes received, fields
 * checked, recorded once per event id, and applied to the order without ever moving it backwards.
 */
export async function receiveCallback(
  deps: DemoDeps,
  raw: string,
  signature: string | undefined,
): Promise<CallbackResult> {
  const check = verifySignature(
    signature,
    raw,
    deps.callbackSecret(),
    Math.floor(deps.now().getTime() / 1000),
  );
  if (!check.ok)
    throw new DemoError(401, `SIGNATURE_${check.reason}`, 'the TDP-Signature header does not verify');
  const body = parseCallback(raw);
  if (body.applicationId !== deps.applicationId)
    throw new DemoError(400, 'CALLBACK_WRONG_APPLICATION', 'the callback is for another application');
  return deps.sql.begin(async (tx) => {
    const at = deps.now();
    const [fresh] = await tx`
      INSERT INTO demo.callback_inbox (event_id, task_id, execution_id, sequence, type, outcome, body, received_at)
      VALUES (${body.eventId}, ${body.taskId}, ${body.executionId}, ${body.sequence}, ${body.type}, 'RECEIVED',
        ${tx.json(body as never)}, ${at})
      ON CONFLICT (event_id) DO NOTHING RETURNING event_id`;
    if (!fresh) return { duplicate: true, outcome: 'DUPLICATE' };
    const order = body.externalRef ? await lockOrder(tx, body.externalRef) : null;
    const outcome =
      order && (order.task_id ?? body.taskId) === body.taskId ? await apply(order) : 'UNKNOWN_ORDER';
    await tx`UPDATE demo.callback_inbox SET outcome = ${outcome}, order_id = ${order?.id ?? null}
             WHERE event_id = ${body.eventId}`;
    return { duplicate: false, outcome };

    async function apply(order: OrderRow): Promise<string> {
      const failure = body.data?.failure ?? null;
      const result = applyCallback(projectionOf(order), { ...body, failureCode: failure?.code ?? null });
      if (result.kind !== 'applied') return result.kind.toUpperCase().replaceAll('-', '_');
      const next = result.order;
      const finished = next.status !== order.business_status && isFinal(next.status);
      // The app's own business action: an approved order's result is published once TDP says SUCCEEDED.
      const publish = next.status === 'SUCCEEDED' && order.approve_before_publish && !order.published_at;
      await saveOrder(tx, {
        ...order,
        task_id: body.taskId,
        business_status: next.status,
        progress: next.progress,
        execution_id: next.executionId,
        past_execution_ids: next.pastExecutionIds,
        last_sequence: next.lastSequence,
        result_asset_id:
          next.status === 'SUCCEEDED'
            ? (resultArchive(body.data?.outputs) ?? order.result_asset_id)
            : order.result_asset_id,
        failure_code:
          finished && next.status !== 'SUCCEEDED' ? (failure?.code ?? next.status) : order.failure_code,
        failure_message:
          finished && next.status !== 'SUCCEEDED' ? (failure?.userMessage ?? null) : order.failure_message,
        published_at: publish ? at : order.published_at,
        updated_at: at,
      });
      await addEvent(tx, order.id, at, body.type, {
        sequence: body.sequence,
        status: body.status,
        progress: body.progress,
      });
      if (publish)
        await addEvent(tx, order.id, at, 'PUBLISHED', { resultAssetId: resultArchive(body.data?.outputs) });
      if (result.gap) {
        deps.log('callback sequence gap', {
          orderId: order.id,
          expected: order.last_sequence + 1,
          received: body.sequence,
        });
        await addEvent(tx, order.id, at, 'SEQUENCE_GAP', {
          expected: order.execution_id === next.executionId ? order.last_sequence + 1 : 1,
          received: body.sequence,
        });
      }
      return result.gap ? 'APPLIED_WITH_GAP' : 'APPLIED';
    }
  });
}

/** The demo app's SQL: assets, orders with their outbox commands, the callback inbox and the timeline. */

import type { Db } from './database.ts';
import type { OrderProjection, OrderStatus, ValidOrder } from './orders.ts';

export interface AssetRow {
  id: string;
  owner_id: string;
  kind: 'SOURCE_ZIP' | 'OUTPUT';
  state: 'UPLOADING' | 'READY';
  file_name: string;
  media_type: string;
  size_bytes: string | null;
  sha256: string | null;
  order_id: string | null;
  max_bytes: string | null;
  created_at: Date;
  ready_at: Date | null;
}

export interface OrderRow {
  id: string;
  owner_id: string;
  idempotency_key: string;
  request_hash: string;
  name: string;
  source_asset_id: string;
  processing_mode: ValidOrder['processingMode'];
  watermark_text: string | null;
  business_status: OrderStatus;
  progress: number;
  task_id: string | null;
  execution_id: string | null;
  past_execution_ids: string[];
  last_sequence: number;
  result_asset_id: string | null;
  failure_code: string | null;
  failure_message: string | null;
  cancel_requested_at: Date | null;
  approve_before_publish: boolean;
  /** When the app published the result (approve-before-publish orders, after TDP's SUCCEEDED). */
  published_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

export interface CommandRow {
  id: string;
  order_id: string;
  command: 'SUBMIT' | 'CANCEL';
  attempts: number;
}

export const projectionOf = (order: OrderRow): OrderProjection => ({
  status: order.business_status,
  progress: order.progress,
  executionId: order.execution_id,
  pastExecutionIds: order.past_execution_ids,
  lastSequence: order.last_sequence,
});

export function orderView(order: OrderRow) {
  return {
    id: order.id,
    name: order.name,
    businessStatus: order.business_status,
    progress: order.progress,
    processingMode: order.processing_mode,
    watermarkText: order.watermark_text,
    sourceAssetId: order.source_asset_id,
    // An order that waits for approval shows its result only once the app has published it.
    resultAssetId: order.approve_before_publish && !order.published_at ? null : order.result_asset_id,
    approveBeforePublish: order.approve_before_publish,
    publishedAt: order.published_at?.toISOString() ?? null,
    taskId: order.task_id,
    executionId: order.execution_id,
    failure: order.failure_code ? { code: order.failure_code, message: order.failure_message } : null,
    cancelRequested: order.cancel_requested_at !== null,
    createdAt: order.created_at.toISOString(),
    updatedAt: order.updated_at.toISOString(),
  };
}

export function assetView(asset: AssetRow) {
  return {
    id: asset.id,
    kind: asset.kind,
    state: asset.state,
    fileName: asset.file_name,
    mediaType: asset.media_type,
    sizeBytes: asset.size_bytes === null ? null : Number(asset.size_bytes),
    sha256: asset.sha256,
    createdAt: asset.created_at.toISOString(),
  };
}

export async function addEvent(sql: Db, orderId: string, at: Date, kind: string, detail: object = {}) {
  await sql`INSERT INTO demo.order_event (order_id, at, kind, detail)
            VALUES (${orderId}, ${at}, ${kind}, ${sql.json(detail as never)})`;
}

export async function findAsset(sql: Db, id: string): Promise<AssetRow | null> {
  if (!isUuid(id)) return null;
  const [row] = await sql<AssetRow[]>`SELECT * FROM demo.asset WHERE id = ${id}`;
  return row ?? null;
}

export async function findOrder(sql: Db, id: string): Promise<OrderRow | null> {
  if (!isUuid(id)) return null;
  const [row] = await sql<OrderRow[]>`SELECT * FROM demo.processing_order WHERE id = ${id}`;
  return row ?? null;
}

export async function lockOrder(sql: Db, id: string): Promise<OrderRow | null> {
  if (!isUuid(id)) return null;
  const [row] = await sql<OrderRow[]>`SELECT * FROM demo.processing_order WHERE id = ${id} FOR UPDATE`;
  return row ?? null;
}

/** Writes the projection (and what came with it) of a locked order. */
export async function saveOrder(sql: Db, order: OrderRow): Promise<void> {
  await sql`
    UPDATE demo.processing_order SET
      business_status = ${order.business_status}, progress = ${order.progress},
      task_id = ${order.task_id}, execution_id = ${order.execution_id},
      past_execution_ids = ${order.past_execution_ids}::uuid[], last_sequence = ${order.last_sequence},
      result_asset_id = ${order.result_asset_id}, failure_code = ${order.failure_code},
      failure_message = ${order.failure_message}, cancel_requested_at = ${order.cancel_requested_at},
      published_at = ${order.published_at}, updated_at = ${order.updated_at}
    WHERE id = ${order.id}`;
}

export async function enqueueCommand(
  sql: Db,
  id: string,
  orderId: string,
  command: CommandRow['command'],
  at: Date,
) {
  await sql`INSERT INTO demo.command_outbox (id, order_id, command, available_at, created_at)
            VALUES (${id}, ${orderId}, ${command}, ${at}, ${at})`;
}

export const isUuid = (value: string) =>
  /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(value);

/**
 * The resource-provider contract (docs/resource-provider.md) for the demo app's assets: TDP asks for
 * a grant on behalf of a running step, the app checks that the task's order may touch the asset, and
 * answers with a signed, expiring URL of its own file store.
 */
import { randomUUID } from 'node:crypto';
import { basename } from 'node:path';
import type { TdpPort } from './sender.ts';
import { findAsset, lockOrder, type OrderRow } from './store.ts';
import { type DemoDeps, DemoError } from './useCases.ts';

export interface GrantRequest {
  grantId?: unknown;
  /** The same for every ask of one allocation (a retry, a renewal): it names the allocation. */
  idempotencyKey?: unknown;
  applicationId?: unknown;
  taskId?: unknown;
  purpose?: unknown;
  resourceRef?: unknown;
  artifact?: { relativePath?: unknown; mediaType?: unknown; maxBytes?: unknown } | null;
}

export interface GrantAnswer {
  url: string;
  method: 'GET' | 'PUT';
  expiresAt: string;
  maxBytes?: number;
  resourceRef?: string;
}

const grantTtlMs = 15 * 60_000;

/** The order a task runs, by the task id the submit recorded, else by asking TDP (the submit's answer may be lost). */
async function orderOfTask(deps: DemoDeps, tdp: TdpPort, taskId: string): Promise<OrderRow | null> {
  const [known] = await deps.sql<OrderRow[]>`SELECT * FROM demo.processing_order WHERE task_id = ${taskId}`;
  if (known) return known;
  const view = await tdp.client.getTask(taskId).catch(() => null);
  if (!view?.task.externalRef) return null;
  return deps.sql.begin(async (tx) => {
    const order = await lockOrder(tx, view.task.externalRef!);
    if (!order || (order.task_id && order.task_id !== taskId)) return null;
    await tx`UPDATE demo.processing_order SET task_id = ${taskId} WHERE id = ${order.id}`;
    return { ...order, task_id: taskId };
  });
}

export async function grant(
  deps: DemoDeps,
  tdp: TdpPort,
  publicUrl: string,
  request: GrantRequest,
): Promise<GrantAnswer> {
  if (request.applicationId !== deps.applicationId)
    throw new DemoError(403, 'GRANT_WRONG_APPLICATION', 'the grant is asked for another application');
  if (typeof request.taskId !== 'string')
    throw new DemoError(400, 'GRANT_MALFORMED', 'taskId must be a task id');
  const order = await orderOfTask(deps, tdp, request.taskId);
  if (!order) throw new DemoError(403, 'GRANT_UNKNOWN_TASK', 'no order of this application runs that task');
  const expiresAt = deps.now().getTime() + grantTtlMs;
  const url = (assetId: string, method: 'GET' | 'PUT', maxBytes: number | null) =>
    `${publicUrl}/files/${assetId}?${deps.files.sign({ assetId, method, expiresAt, maxBytes })}`;

  if (request.purpose === 'DOWNLOAD') {
    const asset =
      typeof request.resourceRef === 'string' ? await findAsset(deps.sql, request.resourceRef) : null;
    // An order reads its own source, and the outputs of its own earlier steps; nothing else.
    const belongs = asset && (asset.id === order.source_asset_id || asset.order_id === order.id);
    if (!asset || !belongs || asset.state !== 'READY')
      throw new DemoError(403, 'GRANT_REFUSED', "the resource is not this order's or is not ready");
    return { url: url(asset.id, 'GET', null), method: 'GET', expiresAt: new Date(expiresAt).toISOString() };
  }
  if (request.purpose === 'ARTIFACT') {
    const artifact = request.artifact ?? {};
    const asked = Number(artifact.maxBytes);
    if (!Number.isSafeInteger(asked) || asked < 1)
      throw new DemoError(400, 'GRANT_MALFORMED', 'artifact.maxBytes must be a positive integer');
    const allocationKey = typeof request.idempotencyKey === 'string' ? request.idempotencyKey : null;
    const fileName = basename(String(artifact.relativePath ?? 'output.zip')).slice(0, 255) || 'output.zip';
    // Asked again with the same key, the allocation made the first time answers, with a fresh URL.
    type Allocated = { id: string; order_id: string; max_bytes: string };
    let [allocated] = await deps.sql<Allocated[]>`
      WITH made AS (
        INSERT INTO demo.asset (id, owner_id, kind, state, file_name, media_type, order_id, max_bytes,
                                allocation_key, created_at)
        VALUES (${randomUUID()}, ${order.owner_id}, 'OUTPUT', 'UPLOADING', ${fileName},
          ${String(artifact.mediaType ?? 'application/octet-stream')}, ${order.id},
          ${Math.min(asked, deps.maxUploadBytes)}, ${allocationKey}, ${deps.now()})
        ON CONFLICT (allocation_key) DO NOTHING
        RETURNING id, order_id, max_bytes)
      SELECT * FROM made
      UNION ALL
      SELECT id, order_id, max_bytes FROM demo.asset WHERE allocation_key = ${allocationKey}`;
    // A concurrent ask with the same key committed after this statement's snapshot: read it now.
    [allocated] = allocated
      ? [allocated]
      : await deps.sql<Allocated[]>`
          SELECT id, order_id, max_bytes FROM demo.asset WHERE allocation_key = ${allocationKey}`;
    if (allocated?.order_id !== order.id)
      throw new DemoError(403, 'GRANT_REFUSED', 'this idempotency key allocated an output of another order');
    const id = allocated.id;
    const maxBytes = Number(allocated.max_bytes);
    return {
      url: url(id, 'PUT', maxBytes),
      method: 'PUT',
      expiresAt: new Date(expiresAt).toISOString(),
      maxBytes,
      resourceRef: id,
    };
  }
  throw new DemoError(403, 'GRANT_REFUSED', 'the demo app grants DOWNLOAD and ARTIFACT only');
}

/** A PUT on a signed URL: the worker's output lands in the store and the asset becomes READY. */
export async function receiveOutput(
  deps: DemoDeps,
  assetId: string,
  maxBytes: number,
  stream: NodeJS.ReadableStream,
): Promise<void> {
  const asset = await findAsset(deps.sql, assetId);
  if (asset?.kind !== 'OUTPUT') throw new DemoError(404, 'ASSET_NOT_FOUND', 'no such output');
  const written = await deps.files.write(assetId, stream, maxBytes).catch((error) => {
    if ((error as Error).name === 'TooLargeError')
      throw new DemoError(413, 'UPLOAD_TOO_LARGE', `more than the granted ${maxBytes} bytes`);
    throw error;
  });
  await deps.sql`
    UPDATE demo.asset SET state = 'READY', size_bytes = ${written.sizeBytes}, sha256 = ${written.sha256},
      ready_at = ${deps.now()}
    WHERE id = ${assetId}`;
}

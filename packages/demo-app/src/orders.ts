/**
 * The demo business application's processing orders, as pure rules:
 * what a valid order is, and how a TDP callback moves an order's projection — never backwards, never
 * by a late result of an older execution, with sequence gaps noticed.
 *
 * Glossary
 * - order: the business intent ("clean this ZIP, then watermark it"), saved before TDP hears of it.
 * - SUBMITTING: the intent is saved and its command is in the outbox; TDP has not confirmed it yet.
 * - execution: one run of the order's TDP task (a retry starts a new one with a new id).
 */
import { createHash } from 'node:crypto';

export const processingModes = ['ARCHIVE_CLEAN_ONLY', 'ARCHIVE_CLEAN_THEN_WATERMARK'] as const;
export type ProcessingMode = (typeof processingModes)[number];

export type OrderStatus =
  | 'SUBMITTING'
  | 'SUBMITTED'
  | 'RUNNING'
  | 'CANCELLING'
  | 'SUCCEEDED'
  | 'FAILED'
  | 'CANCELLED'
  /** An approve-before-publish order whose owner rejected the result. */
  | 'REJECTED';

export interface OrderRequest {
  name?: unknown;
  sourceAssetId?: unknown;
  processingMode?: unknown;
  watermarkText?: unknown;
  approveBeforePublish?: unknown;
}

export interface AssetFacts {
  kind: 'SOURCE_ZIP' | 'OUTPUT';
  state: 'UPLOADING' | 'READY';
}

export interface ValidOrder {
  name: string;
  sourceAssetId: string;
  processingMode: ProcessingMode;
  watermarkText: string | null;
  /** The task waits for the owner's approval after processing; the app publishes after it. */
  approveBeforePublish: boolean;
  /** Fingerprint of the request, for idempotency-key replays. */
  requestHash: string;
}

export interface FieldError {
  field: string;
  code: string;
  message: string;
}

/** Characters as people count them (code points, not UTF-16 units or bytes): "机密" is 2. */
const length = (text: string) => [...text].length;

/**
 * Checks a new order before anything is saved: a name of 1–200 characters after trimming; one of
 * the two modes; a watermark of 1–100 characters for the watermark mode and none for clean-only; a
 * source that is a READY ZIP. All errors at once, per field.
 */
export function validateOrder(
  request: OrderRequest,
  asset: AssetFacts | null,
): { ok: true; order: ValidOrder } | { ok: false; errors: FieldError[] } {
  const errors: FieldError[] = [];
  const name = typeof request.name === 'string' ? request.name.trim() : '';
  if (length(name) < 1 || length(name) > 200)
    errors.push({ field: 'name', code: 'NAME_INVALID', message: 'name must have 1 to 200 characters' });
  const mode = processingModes.find((m) => m === request.processingMode);
  if (!mode)
    errors.push({
      field: 'processingMode',
      code: 'PROCESSING_MODE_INVALID',
      message: 'processingMode must be ARCHIVE_CLEAN_ONLY or ARCHIVE_CLEAN_THEN_WATERMARK',
    });
  const watermark =
    typeof request.watermarkText === 'string'
      ? request.watermarkText.trim()
      : request.watermarkText == null
        ? ''
        : null;
  if (watermark === null)
    errors.push({ field: 'watermarkText', code: 'WATERMARK_INVALID', message: 'watermarkText must be text' });
  else if (mode === 'ARCHIVE_CLEAN_THEN_WATERMARK' && (length(watermark) < 1 || length(watermark) > 100))
    errors.push({
      field: 'watermarkText',
      code: 'WATERMARK_INVALID',
      message: 'watermarkText must have 1 to 100 characters for ARCHIVE_CLEAN_THEN_WATERMARK',
    });
  else if (mode === 'ARCHIVE_CLEAN_ONLY' && watermark !== '')
    errors.push({
      field: 'watermarkText',
      code: 'WATERMARK_NOT_ALLOWED',
      message: 'watermarkText must be empty for ARCHIVE_CLEAN_ONLY',
    });
  const sourceAssetId = typeof request.sourceAssetId === 'string' ? request.sourceAssetId : '';
  if (asset?.kind !== 'SOURCE_ZIP' || asset.state !== 'READY')
    errors.push({
      field: 'sourceAssetId',
      code: 'SOURCE_NOT_READY',
      message: 'sourceAssetId must name an uploaded ZIP that is READY',
    });
  const approval = request.approveBeforePublish ?? false;
  if (typeof approval !== 'boolean')
    errors.push({
      field: 'approveBeforePublish',
      code: 'APPROVAL_CHOICE_INVALID',
      message: 'approveBeforePublish must be true or false',
    });
  if (errors.length > 0 || !mode || watermark === null) return { ok: false, errors };
  const watermarkText = mode === 'ARCHIVE_CLEAN_THEN_WATERMARK' ? watermark : null;
  const approveBeforePublish = approval === true;
  const requestHash = createHash('sha256')
    // Orders without the option keep the fingerprint they always had.
    .update(
      JSON.stringify([name, sourceAssetId, mode, watermarkText, ...(approveBeforePublish ? [true] : [])]),
    )
    .digest('hex');
  return {
    ok: true,
    order: { name, sourceAssetId, processingMode: mode, watermarkText, approveBeforePublish, requestHash },
  };
}

/** The order as the callbacks have shaped it. */
export interface OrderProjection {
  status: OrderStatus;
  progress: number;
  /** The execution the order follows now, and those it followed before (older: their news is late). */
  executionId: string | null;
  pastExecutionIds: string[];
  /** Highest callback sequence applied, per the current execution. */
  lastSequence: number;
}

export interface CallbackFacts {
  executionId: string;
  sequence: number;
  /** TDP's execution status: CREATED, QUEUED, RUNNING, SUCCEEDED, FAILED, TIMED_OUT, CANCELLING, CANCELLED. */
  status: string;
  progress: number | null;
  /** The task's failure code, when it failed (APPROVAL_REJECTED: the owner rejected the result). */
  failureCode?: string | null;
}

/** The order status an execution status means; a rejected approval is the order's own end. */
function statusFor(status: string, failureCode: string | null | undefined): OrderStatus | undefined {
  if (status === 'FAILED' && failureCode === 'APPROVAL_REJECTED') return 'REJECTED';
  return fromExecution[status];
}

const fromExecution: Record<string, OrderStatus> = {
  CREATED: 'SUBMITTED',
  QUEUED: 'SUBMITTED',
  RUNNING: 'RUNNING',
  CANCELLING: 'CANCELLING',
  SUCCEEDED: 'SUCCEEDED',
  FAILED: 'FAILED',
  TIMED_OUT: 'FAILED',
  CANCELLED: 'CANCELLED',
};

const rank: Record<OrderStatus, number> = {
  SUBMITTING: 0,
  SUBMITTED: 1,
  RUNNING: 2,
  CANCELLING: 3,
  SUCCEEDED: 4,
  FAILED: 4,
  CANCELLED: 4,
  REJECTED: 4,
};

export const isFinal = (status: OrderStatus) => rank[status] === 4;

export type CallbackOutcome =
  | { kind: 'applied'; order: OrderProjection; gap: boolean }
  /** A result of an execution the order has moved past (e.g. before a retry). */
  | { kind: 'older-execution' }
  /** Not newer than what the order shows (a late or repeated sequence): nothing moves back. */
  | { kind: 'not-newer' }
  | { kind: 'unknown-status' };

/**
 * What a verified, de-duplicated callback does to the order. A new execution (a retry) is adopted and
 * starts its own sequence; within one, the status only moves forward and progress only rises; a
 * sequence past the next expected one is applied and reported as a gap (the reconciler will ask TDP).
 */
export function applyCallback(order: OrderProjection, callback: CallbackFacts): CallbackOutcome {
  const next = statusFor(callback.status, callback.failureCode);
  if (!next) return { kind: 'unknown-status' };
  if (order.pastExecutionIds.includes(callback.executionId)) return { kind: 'older-execution' };
  const newExecution = order.executionId !== callback.executionId;
  const base: OrderProjection = newExecution
    ? {
        status: order.status,
        progress: 0,
        executionId: callback.executionId,
        pastExecutionIds: order.executionId
          ? [...order.pastExecutionIds, order.executionId]
          : order.pastExecutionIds,
        lastSequence: 0,
      }
    : order;
  if (!newExecution && callback.sequence <= order.lastSequence) return { kind: 'not-newer' };
  // A retry may restart a finished order; within one execution nothing goes back.
  const forward = newExecution || (rank[next] >= rank[base.status] && !isFinal(base.status));
  const status = forward ? next : base.status;
  const progress = status === 'SUCCEEDED' ? 100 : Math.max(base.progress, callback.progress ?? 0);
  return {
    kind: 'applied',
    gap: callback.sequence > base.lastSequence + 1,
    order: { ...base, status, progress, lastSequence: callback.sequence },
  };
}

/** What TDP says about a task's current execution, when the reconciler asks. */
export interface ExecutionSnapshot {
  executionId: string;
  status: string;
  progress: number;
  failureCode?: string | null;
}

/**
 * The reconciler's rule: TDP's current execution is the truth when callbacks have not arrived. It
 * moves the order forward only (a result of an execution the order has moved past changes nothing)
 * and keeps the callback sequence, so callbacks that arrive later still apply in order.
 */
export function reconcileOrder(order: OrderProjection, snapshot: ExecutionSnapshot): OrderProjection | null {
  const next = statusFor(snapshot.status, snapshot.failureCode);
  if (!next || order.pastExecutionIds.includes(snapshot.executionId)) return null;
  const newExecution = order.executionId !== snapshot.executionId;
  if (!newExecution && (isFinal(order.status) || rank[next] < rank[order.status])) return null;
  const progress =
    next === 'SUCCEEDED' ? 100 : Math.max(newExecution ? 0 : order.progress, snapshot.progress);
  if (!newExecution && next === order.status && progress === order.progress) return null;
  return {
    status: next,
    progress,
    executionId: snapshot.executionId,
    pastExecutionIds:
      newExecution && order.executionId
        ? [...order.pastExecutionIds, order.executionId]
        : order.pastExecutionIds,
    lastSequence: newExecution ? 0 : order.lastSequence,
  };
}

/**
 * Checking a callback from TDP before trusting it: the `TDP-Signature` header over the raw body bytes,
 * with any of the application's callback secrets (during a rotation: the new one and the previous
 * one), within a tolerance of the receiver's clock. The scheme is the protocol's (signing.ts).
 */
import type { ExecutionStatus, LifecycleStatus } from '@tdp/protocol';
// The signing module alone: the SDK loads nothing of the protocol's schemas (or typebox) at run time.
import { type SignatureCheck, type SignedBody, verifySignature } from '@tdp/protocol/signing';

/** The header TDP signs callbacks in (lowercase, as Node gives headers). */
export const callbackSignatureHeader = 'tdp-signature';

export interface VerifyCallbackOptions {
  /** How far `t` may be from now, in seconds (default 300). */
  toleranceSeconds?: number;
  /** The receiver's clock, in Unix seconds (default: now). */
  nowSeconds?: number;
}

/**
 * Whether `signatureHeader` is a valid TDP signature of `rawBody` under one of `secrets`.
 * `{ ok: false, reason }` says why not: MALFORMED (no usable header), EXPIRED (too old or too far
 * ahead), MISMATCH (signed with another secret, or the body changed).
 */
export function verifyCallback(
  rawBody: SignedBody,
  signatureHeader: string | undefined,
  secrets: readonly string[],
  options: VerifyCallbackOptions = {},
): SignatureCheck {
  if (secrets.length === 0) throw new Error('verifyCallback needs at least one callback secret');
  const now = options.nowSeconds ?? Math.floor(Date.now() / 1000);
  let result: SignatureCheck = { ok: false, reason: 'MISMATCH' };
  for (const secret of secrets) {
    result = verifySignature(signatureHeader, rawBody, secret, now, options.toleranceSeconds ?? 300);
    if (result.ok || result.reason !== 'MISMATCH') return result;
  }
  return result;
}

/** A callback's body (docs/callbacks.md). Deduplicate by `eventId`; order by `sequence`. */
export interface CallbackEvent {
  specVersion: string;
  eventId: string;
  /** `execution.created`, `execution.queued`, `execution.running`, `execution.progress`, `execution.succeeded`… */
  type: string;
  /** 1, 2, 3 … within one execution. */
  sequence: number;
  applicationId: string;
  taskId: string;
  executionId: string;
  externalRef: string | null;
  status: ExecutionStatus;
  progress: number;
  data: {
    lifecycleStatus: LifecycleStatus;
    failure: { code: string; userMessage: string | null } | null;
    /** Each step's output, by step key, once the execution succeeded (null before). */
    outputs: Record<string, unknown> | null;
  };
  occurredAt: string;
}

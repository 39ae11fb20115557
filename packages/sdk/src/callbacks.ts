/**
 * Checking a callback from TDP before trusting it, over the raw body bytes, with any of the application's
 * callback secrets (during a rotation: the new one and the previous one), within a tolerance of the
 * receiver's clock. Each callback is signed twice (the protocol's signing.ts): the Standard Webhooks
 * headers (`webhook-id`, `webhook-timestamp`, `webhook-signature`) and the deprecated `TDP-Signature`.
 * Given the request's headers, the verifier checks the Standard Webhooks signature when it is there and
 * `TDP-Signature` otherwise; given one header value, it checks it as `TDP-Signature`, as it always did.
 */
import type { ExecutionStatus, LifecycleStatus } from '@tdp/protocol';
// The signing module alone: the SDK loads nothing of the protocol's schemas (or typebox) at run time.
import {
  type SignatureCheck,
  type SignedBody,
  standardWebhookHeaders,
  verifySignature,
  verifyStandardWebhook,
} from '@tdp/protocol/signing';

export { standardWebhookSecret } from '@tdp/protocol/signing';

/** The header TDP signs callbacks in (lowercase, as Node gives headers); deprecated for Standard Webhooks. */
export const callbackSignatureHeader = 'tdp-signature';

/** A request's headers: Node's `request.headers`, or a record of your framework's. */
export type CallbackHeaders = Readonly<Record<string, string | readonly string[] | undefined>>;

export interface VerifyCallbackOptions {
  /** How far the signature's time may be from now, in seconds (default 300). */
  toleranceSeconds?: number;
  /** The receiver's clock, in Unix seconds (default: now). */
  nowSeconds?: number;
}

/**
 * Whether a callback's signature is valid for `rawBody` under one of `secrets`. `signature` is the
 * request's headers (Standard Webhooks, or `TDP-Signature` when those are absent) or the value of the
 * `TDP-Signature` header alone. `{ ok: false, reason }` says why not: MALFORMED (no usable header),
 * EXPIRED (too old or too far ahead), MISMATCH (signed with another secret, or the body changed).
 */
export function verifyCallback(
  rawBody: SignedBody,
  signature: string | undefined | CallbackHeaders,
  secrets: readonly string[],
  options: VerifyCallbackOptions = {},
): SignatureCheck {
  if (secrets.length === 0) throw new Error('verifyCallback needs at least one callback secret');
  const now = options.nowSeconds ?? Math.floor(Date.now() / 1000);
  const tolerance = options.toleranceSeconds ?? 300;
  const check = checkerOf(signature, rawBody, now, tolerance);
  let result: SignatureCheck = { ok: false, reason: 'MISMATCH' };
  for (const secret of secrets) {
    result = check(secret);
    if (result.ok || result.reason !== 'MISMATCH') return result;
  }
  return result;
}

function checkerOf(
  signature: string | undefined | CallbackHeaders,
  rawBody: SignedBody,
  now: number,
  tolerance: number,
): (secret: string) => SignatureCheck {
  if (typeof signature !== 'object') {
    return (secret) => verifySignature(signature, rawBody, secret, now, tolerance);
  }
  const standard = {
    id: headerIn(signature, standardWebhookHeaders.id, ','),
    timestamp: headerIn(signature, standardWebhookHeaders.timestamp, ','),
    signature: headerIn(signature, standardWebhookHeaders.signature, ' '),
  };
  if (standard.signature !== undefined) {
    return (secret) => verifyStandardWebhook(standard, rawBody, secret, now, tolerance);
  }
  const legacy = headerIn(signature, callbackSignatureHeader, ',');
  return (secret) => verifySignature(legacy, rawBody, secret, now, tolerance);
}

/** A header's value whatever the case of its name; repeated lines joined with `separator`. */
function headerIn(headers: CallbackHeaders, name: string, separator: string): string | undefined {
  const key = name in headers ? name : Object.keys(headers).find((k) => k.toLowerCase() === name);
  const value = key === undefined ? undefined : headers[key];
  return typeof value === 'string' || value === undefined ? value : value.join(separator);
}

/**
 * A callback's body (docs/callbacks.md). Deduplicate by `eventId`; order by `sequence`. `Outputs` types
 * `data.outputs` by step key (a handler given a `defineWorkflow()` value sets it).
 */
export interface CallbackEvent<Outputs = Record<string, unknown>> {
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
    /**
     * The output of each succeeded step, by step key, once the execution succeeded (null before); a step
     * that failed or was skipped has none.
     */
    outputs: Partial<Outputs> | null;
  };
  occurredAt: string;
}

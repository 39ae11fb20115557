/**
 * Decisions on approval steps, taken for one of your users: the server takes them from people only, so
 * the SDK mints a short-lived user token for the person with your API key and decides with it.
 */
import { randomUUID } from 'node:crypto';
import type { StepDecisionView, UserTokenRequest } from '@tdp/protocol';
import type { CallOptions, createTransport } from './transport.ts';

/** A decision on an approval step, taken for one of your users. */
export interface StepDecisionOptions extends CallOptions {
  /**
   * The person deciding (their id, or with the projects and roles they act in): the server takes
   * decisions from people only, so the SDK mints a short-lived user token for them with your API key.
   * They must be named by the step's approvers and see the task.
   */
  asUser: string | Omit<UserTokenRequest, 'ttlSeconds'>;
  comment?: string;
  /** Checked against the step's `formSchema`, when it has one. */
  data?: unknown;
  /** Without it one is generated; retries of this call send the same one. */
  idempotencyKey?: string;
}

export interface StepDecision extends StepDecisionView {
  /** True when the key (or the same decision) had been sent already: this is the first answer again. */
  replayed: boolean;
  /** The Idempotency-Key sent (yours, or the one generated). */
  idempotencyKey: string;
}

/** Lifetime of the user token an approval decision is sent with: its retries included, no longer. */
const decisionTokenTtlSeconds = 300;

const segment = encodeURIComponent;

export async function decideStep(
  transport: ReturnType<typeof createTransport>,
  userToken: (request: UserTokenRequest, call: CallOptions) => Promise<{ token: string }>,
  action: 'approve' | 'reject',
  taskId: string,
  stepKey: string,
  options: StepDecisionOptions,
): Promise<StepDecision> {
  const { asUser, comment, data, idempotencyKey = randomUUID(), ...call } = options;
  const person = typeof asUser === 'string' ? { userId: asUser } : asUser;
  const { token } = await userToken({ ...person, ttlSeconds: decisionTokenTtlSeconds }, call);
  const answer = await transport.send({
    ...call,
    method: 'POST',
    path: `/v1/tasks/${segment(taskId)}/steps/${segment(stepKey)}:${action}`,
    body: { ...(comment !== undefined ? { comment } : {}), ...(data !== undefined ? { data } : {}) },
    headers: { authorization: `Bearer ${token}`, 'idempotency-key': idempotencyKey },
    retry: 'idempotent',
  });
  return { ...(answer.body as StepDecisionView), replayed: answer.status === 200, idempotencyKey };
}

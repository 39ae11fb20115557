/**
 * Broadcasts (docs/realtime.md): a notice to every person of a tenant (`task_tenant:{tenant}`)
 * or to everyone (`task_system:public`). Only the server publishes them — an application to its own
 * tenant, the operator to any tenant or to everyone — and the wider the scope, the less a message says:
 * a tenant notice has a title, a message, a severity and an optional link; a system notice a message
 * and a severity. Neither ever carries task data. Each is written with its audit record in one
 * transaction and published by the realtime relay (retried, DEAD past the limit, like any projection).
 * With an Idempotency-Key, a retry with the same request gets the first answer and publishes nothing
 * more; the same key with another request is IDEMPOTENCY_KEY_REUSED (the `idempotency` table, as tasks).
 */
import { channels } from '../facts/projections.ts';
import type { IdempotencyRecord, OperatorActor, OperatorAuditRecord } from '../facts/records.ts';
import { fingerprint } from '../shared/canonicalJson.ts';
import { AppError } from '../shared/errors.ts';
import type { Clock, IdGenerator } from '../shared/ports.ts';

export type BroadcastSeverity = 'INFO' | 'WARNING' | 'CRITICAL';

export interface TenantNotice {
  title: string;
  message: string;
  severity: BroadcastSeverity;
  link?: string;
}

export interface SystemNotice {
  message: string;
  severity: BroadcastSeverity;
}

/** What a page receives on a broadcast channel. */
export type BroadcastMessage =
  | ({ kind: 'broadcast'; scope: 'TENANT'; id: string; link: string | null; sentAt: string } & Omit<
      TenantNotice,
      'link'
    >)
  | ({ kind: 'broadcast'; scope: 'SYSTEM'; id: string; sentAt: string } & SystemNotice);

export interface BroadcastRecord {
  id: string;
  /** Null for a system broadcast. */
  tenantId: string | null;
  channel: string;
  payload: BroadcastMessage;
  createdAt: Date;
}

/** The answer to a broadcast request (202), and to its retries with the same Idempotency-Key. */
export interface BroadcastAnswer {
  id: string;
  channel: string;
  sentAt: string;
}

export interface BroadcastStore {
  /**
   * The broadcast, claimable by the relay, its audit record and, when given, the idempotency record, in
   * one transaction; 'keyTaken' (and nothing written) when that record's key is already taken.
   */
  insert(
    broadcast: BroadcastRecord,
    audit: OperatorAuditRecord,
    idempotency: IdempotencyRecord | null,
  ): Promise<'inserted' | 'keyTaken'>;
  findIdempotency(principal: string, operation: string, key: string): Promise<IdempotencyRecord | null>;
}

export interface BroadcastResult {
  /** A retry with the key of an earlier request: nothing was sent again. */
  replayed: boolean;
  answer: BroadcastAnswer;
}

export interface BroadcastDeps {
  store: BroadcastStore;
  clock: Clock;
  ids: IdGenerator;
  tenantExists(tenantId: string): Promise<boolean>;
  /** The broadcast was committed: the relay may publish it now. */
  committed(): void;
}

export const broadcastActions = { tenant: 'BROADCAST_TENANT', system: 'BROADCAST_SYSTEM' } as const;

/** Who sent it: an application (`application:<id>`), or an operator (named in the audit). */
export type BroadcastActor = { application: string } | { operator: OperatorActor };

/** Whose idempotency keys the request's is among: each application's, each operator's own. */
const keyOwner = (actor: BroadcastActor) =>
  'application' in actor
    ? `application:${actor.application}`
    : `operator:${actor.operator.operatorId ?? 'bootstrap'}`;
const auditActor = (actor: BroadcastActor): OperatorActor =>
  'application' in actor
    ? { operatorId: null, name: `application:${actor.application}`, credentialId: null }
    : actor.operator;

export async function broadcastToTenant(
  deps: BroadcastDeps,
  request: { tenantId: string; notice: TenantNotice; actor: BroadcastActor; idempotencyKey?: string },
): Promise<BroadcastResult> {
  if (!(await deps.tenantExists(request.tenantId)))
    throw new AppError('TENANT_NOT_FOUND', `tenant ${request.tenantId} does not exist`);
  const { title, message, severity, link } = request.notice;
  return send(deps, request.tenantId, channels.tenant(request.tenantId), broadcastActions.tenant, {
    request,
    payload: (id, sentAt) => ({
      kind: 'broadcast',
      scope: 'TENANT',
      id,
      title,
      message,
      severity,
      link: link ?? null,
      sentAt,
    }),
  });
}

export async function broadcastToEveryone(
  deps: BroadcastDeps,
  request: { notice: SystemNotice; actor: BroadcastActor; idempotencyKey?: string },
): Promise<BroadcastResult> {
  const { message, severity } = request.notice;
  return send(deps, null, channels.system, broadcastActions.system, {
    request,
    payload: (id, sentAt) => ({ kind: 'broadcast', scope: 'SYSTEM', id, message, severity, sentAt }),
  });
}

async function send(
  deps: BroadcastDeps,
  tenantId: string | null,
  channel: string,
  action: string,
  what: {
    request: { notice: { message: string }; actor: BroadcastActor; idempotencyKey?: string };
    payload: (id: string, sentAt: string) => BroadcastMessage;
  },
): Promise<BroadcastResult> {
  const { idempotencyKey: key } = what.request;
  const owner = keyOwner(what.request.actor);
  // The scope is part of the request: the same key for another tenant is another request.
  const requestHash = fingerprint({ tenantId, notice: what.request.notice });
  if (key) {
    const earlier = await deps.store.findIdempotency(owner, action, key);
    if (earlier) return replay(earlier, requestHash);
  }
  const createdAt = deps.clock.now();
  const id = deps.ids.newId();
  const broadcast: BroadcastRecord = {
    id,
    tenantId,
    channel,
    payload: what.payload(id, createdAt.toISOString()),
    createdAt,
  };
  const answer: BroadcastAnswer = { id, channel, sentAt: createdAt.toISOString() };
  const audit: OperatorAuditRecord = {
    id: deps.ids.newId(),
    action,
    subjectId: tenantId ?? 'system',
    actor: auditActor(what.request.actor),
    tenantId,
    // What was said is why it was sent.
    reason: what.request.notice.message,
    details: { broadcastId: id, channel, message: broadcast.payload },
    createdAt,
  };
  const idempotency: IdempotencyRecord | null = key
    ? {
        principal: owner,
        operation: action,
        key,
        requestHash,
        responseStatus: 202,
        responseBody: answer,
        createdAt,
      }
    : null;
  if ((await deps.store.insert(broadcast, audit, idempotency)) === 'keyTaken') {
    // A concurrent request with the same key committed first: its answer is this one's.
    const earlier = await deps.store.findIdempotency(owner, action, key!);
    if (!earlier) throw new Error('idempotency key taken but its record is missing');
    return replay(earlier, requestHash);
  }
  deps.committed();
  return { replayed: false, answer };
}

function replay(earlier: IdempotencyRecord, requestHash: string): BroadcastResult {
  if (earlier.requestHash !== requestHash)
    throw new AppError(
      'IDEMPOTENCY_KEY_REUSED',
      `Idempotency-Key "${earlier.key}" was used for a different broadcast; use a new key for a new one`,
    );
  return { replayed: true, answer: earlier.responseBody as BroadcastAnswer };
}

/**
 * Broadcasts (source document 002 §6.6): a notice to every person of a tenant (`task_tenant:{tenant}`)
 * or to everyone (`task_system:public`). Only the server publishes them — an application to its own
 * tenant, the operator to any tenant or to everyone — and the wider the scope, the less a message says:
 * a tenant notice has a title, a message, a severity and an optional link; a system notice a message
 * and a severity. Neither ever carries task data. Each is written with its audit record in one
 * transaction and published by the realtime relay (retried, DEAD past the limit, like any projection).
 */
import { channels } from '../facts/projections.ts';
import type { OperatorAuditRecord } from '../facts/records.ts';
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

export interface BroadcastStore {
  /** The broadcast, claimable by the relay, and its audit record, in one transaction. */
  insert(broadcast: BroadcastRecord, audit: OperatorAuditRecord): Promise<void>;
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

/** Who sent it, as the audit names them: `operator`, or `application:<id>`. */
export type BroadcastActor = string;

export async function broadcastToTenant(
  deps: BroadcastDeps,
  request: { tenantId: string; notice: TenantNotice; actor: BroadcastActor },
): Promise<BroadcastRecord> {
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
  request: { notice: SystemNotice; actor: BroadcastActor },
): Promise<BroadcastRecord> {
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
    request: { notice: { message: string }; actor: BroadcastActor };
    payload: (id: string, sentAt: string) => BroadcastMessage;
  },
): Promise<BroadcastRecord> {
  const createdAt = deps.clock.now();
  const id = deps.ids.newId();
  const broadcast: BroadcastRecord = {
    id,
    tenantId,
    channel,
    payload: what.payload(id, createdAt.toISOString()),
    createdAt,
  };
  await deps.store.insert(broadcast, {
    id: deps.ids.newId(),
    action,
    subjectId: tenantId ?? 'system',
    actor: what.request.actor,
    // What was said is why it was sent.
    reason: what.request.notice.message,
    details: { broadcastId: id, channel, message: broadcast.payload },
    createdAt,
  });
  deps.committed();
  return broadcast;
}

/**
 * What applications and operators change about fair share at run time (docs/scheduling.md): a
 * concurrency key's limit (without a redeploy), pausing and resuming a key, and the weights of tenants
 * and applications. Operators' changes are audited with who and why in the same transaction.
 */
import { newId } from '@tdp/protocol';
import type { OperatorActor, OperatorAuditRecord } from '../facts/records.ts';
import { AppError } from '../shared/errors.ts';
import type { Clock } from '../shared/ports.ts';
import type { ConcurrencyKeyView, SchedulingControlStore, WeightScope } from './ports.ts';

export interface SchedulingControlDeps {
  clock: Clock;
  store: SchedulingControlStore;
  /** Parked steps may have room now: the scheduler looks again. */
  keysChanged: () => void;
}

export const schedulingActions = {
  keyChanged: 'CONCURRENCY_KEY_CHANGED',
  weightChanged: 'SCHEDULING_WEIGHT_CHANGED',
  quotaChanged: 'APPLICATION_QUOTA_CHANGED',
} as const;

const unknownKey = (name: string) =>
  new AppError('CONCURRENCY_KEY_UNKNOWN', `no workflow of this tenant declares concurrency key ${name}`);

export function listConcurrencyKeys(
  deps: SchedulingControlDeps,
  tenantId: string,
): Promise<ConcurrencyKeyView[]> {
  return deps.store.keys(tenantId);
}

/** A key's run-time limit (null: back to the limit its definitions declare) or pause, by an application or an operator. */
export async function changeConcurrencyKey(
  deps: SchedulingControlDeps,
  request: {
    tenantId: string;
    name: string;
    change: { limit?: number | null; paused?: boolean };
    /** An operator's change is audited; an application's is its own. */
    operator?: { actor: OperatorActor; reason: string };
  },
): Promise<ConcurrencyKeyView> {
  const now = deps.clock.now();
  const audit = (before: ConcurrencyKeyView, after: ConcurrencyKeyView): OperatorAuditRecord | null =>
    request.operator
      ? {
          id: newId(),
          action: schedulingActions.keyChanged,
          subjectId: request.name,
          actor: request.operator.actor,
          reason: request.operator.reason,
          details: { change: request.change },
          tenantId: request.tenantId,
          before: { limit: before.limit, paused: before.paused },
          after: { limit: after.limit, paused: after.paused },
          createdAt: now,
        }
      : null;
  const changed = await deps.store.changeKey(request.tenantId, request.name, request.change, now, audit);
  if (!changed) throw unknownKey(request.name);
  deps.keysChanged();
  return changed;
}

/**
 * An operator's weight for a tenant, an application, or a fairness key of an application (`id`
 * `<application id>:<key>`; it takes the place of the weight the key's tasks were created with). 1 when
 * never set.
 */
export async function setSchedulingWeight(
  deps: SchedulingControlDeps,
  request: {
    scope: WeightScope;
    id: string;
    weight: number;
    actor: OperatorActor;
    reason: string;
    /** Checked by the caller (its role there) against `SchedulingControlStore.tenantOf`. */
    tenantId: string;
  },
): Promise<{ scope: WeightScope; id: string; weight: number; auditId: string }> {
  const now = deps.clock.now();
  const audit: OperatorAuditRecord = {
    id: newId(),
    action: schedulingActions.weightChanged,
    subjectId: `${request.scope}:${request.id}`,
    actor: request.actor,
    reason: request.reason,
    details: { scope: request.scope, weight: request.weight },
    tenantId: request.tenantId,
    after: { weight: request.weight },
    createdAt: now,
  };
  await deps.store.setWeight(request.scope, request.id, request.weight, now, audit);
  return { scope: request.scope, id: request.id, weight: request.weight, auditId: audit.id };
}

/**
 * An operator's tasks-in-flight quota for an application (null: back to the platform's setting). Creates
 * read it with their in-flight count, so it applies within a second (features/tasks/inFlightCounts.ts).
 */
export async function setApplicationQuota(
  deps: SchedulingControlDeps,
  request: {
    applicationId: string;
    tasksInFlight: number | null;
    actor: OperatorActor;
    reason: string;
    /** Checked by the caller (its role there) against `SchedulingControlStore.tenantOf`. */
    tenantId: string;
  },
): Promise<{ applicationId: string; tasksInFlight: number | null; auditId: string }> {
  const now = deps.clock.now();
  const id = newId();
  await deps.store.setQuota(request.applicationId, request.tasksInFlight, now, (before) => ({
    id,
    action: schedulingActions.quotaChanged,
    subjectId: request.applicationId,
    actor: request.actor,
    reason: request.reason,
    details: { tasksInFlight: request.tasksInFlight },
    tenantId: request.tenantId,
    before: { tasksInFlight: before },
    after: { tasksInFlight: request.tasksInFlight },
    createdAt: now,
  }));
  return { applicationId: request.applicationId, tasksInFlight: request.tasksInFlight, auditId: id };
}

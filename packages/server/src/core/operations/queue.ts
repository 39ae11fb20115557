/**
 * The dashboard's queue page (docs/dashboard.md): what fair share is doing now and did lately. Per
 * tenant and application: the steps waiting for a worker, the steps running on one, and the weight;
 * per concurrency key of a tenant: its limit, pause and counts; and the share of the placements each
 * tenant (and application) got, minute by minute, over the last minutes.
 */
import type { Clock } from '../shared/ports.ts';
import type { ConcurrencyKeyView } from '../workers/ports.ts';

/** How far back the share chart looks, in one-minute buckets. */
export const shareMinutes = { default: 30, max: 180 } as const;

/** At most this many tenants are listed (the busiest first): the page stays readable and cheap. */
export const queueTenantLimit = 50;

export interface ApplicationQueue {
  id: string;
  name: string;
  /** Its fair-share weight within its tenant (1 when never set). */
  weight: number;
  /** Steps waiting for a worker (open scheduling requests, parked ones included). */
  waiting: number;
  /** Attempts open on workers now. */
  running: number;
  /** Attempts placed on workers over the window. */
  placed: number;
  /** Its own limit of unfinished tasks (docs/scheduling.md#quotas); null: the platform setting applies. */
  tasksInFlightQuota: number | null;
}

export interface TenantQueue {
  id: string;
  name: string;
  /** Its fair-share weight against the other tenants (1 when never set). */
  weight: number;
  waiting: number;
  running: number;
  placed: number;
  applications: ApplicationQueue[];
}

export interface Placements {
  at: Date;
  tenantId: string;
  applicationId: string;
  placed: number;
}

export interface QueueReads {
  /**
   * The tenants of `tenants` (busiest first, at most `limit`) with their applications: counts now,
   * weights, and the attempts placed since `since`.
   */
  tenantQueues(tenants: 'all' | string[], since: Date, limit: number): Promise<TenantQueue[]>;
  /** Attempts placed on workers per minute, tenant and application, in [from, to); buckets with none are left out. */
  placements(tenantIds: string[], from: Date, to: Date): Promise<Placements[]>;
  /** A tenant's concurrency keys: declared or set, with their running and waiting steps. */
  keys(tenantId: string): Promise<ConcurrencyKeyView[]>;
}

/** The minutes asked for, within bounds (the default when not a whole number). */
export function shareWindowMinutes(asked: unknown): number {
  const minutes = Number(asked);
  if (!Number.isInteger(minutes) || minutes < 1) return shareMinutes.default;
  return Math.min(minutes, shareMinutes.max);
}

/** The queue page's answer: the tenants in reach, their keys, and each tenant's placements per minute. */
export async function queueOverview(
  deps: { reads: QueueReads; clock: Clock },
  tenants: 'all' | string[],
  minutes: number,
) {
  const now = deps.clock.now();
  // Minutes cut on the epoch, as the pipeline charts cut them; the last one holds `now`.
  const end = Math.floor(now.getTime() / 60_000) * 60_000 + 60_000;
  const from = new Date(end - minutes * 60_000);
  const listed = await deps.reads.tenantQueues(tenants, from, queueTenantLimit);
  const ids = listed.map((t) => t.id);
  const [keys, placements] = await Promise.all([
    Promise.all(ids.map((id) => deps.reads.keys(id))),
    deps.reads.placements(ids, from, new Date(end)),
  ]);
  const times = Array.from({ length: minutes }, (_, i) => from.getTime() / 1000 + i * 60);
  const series = listed.map((tenant) => {
    const placed = times.map(() => 0);
    for (const p of placements)
      if (p.tenantId === tenant.id) placed[(p.at.getTime() - from.getTime()) / 60_000]! += p.placed;
    return { tenantId: tenant.id, name: tenant.name, placed };
  });
  const total = listed.reduce((sum, t) => sum + t.placed, 0);
  // A share is of what the reader sees: a tenant-scoped operator learns nothing of others' volume.
  const share = (placed: number, of: number) => (of === 0 ? null : placed / of);
  return {
    from: from.toISOString(),
    to: new Date(end).toISOString(),
    now: now.toISOString(),
    minutes,
    tenants: listed.map((tenant, i) => ({
      ...tenant,
      share: share(tenant.placed, total),
      applications: tenant.applications.map((a) => ({ ...a, share: share(a.placed, tenant.placed) })),
      keys: keys[i]!,
    })),
    chart: { bucketSeconds: 60, times, series },
  };
}

export type QueueOverview = Awaited<ReturnType<typeof queueOverview>>;

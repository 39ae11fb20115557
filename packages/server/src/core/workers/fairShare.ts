/**
 * Fair share: the order in which waiting steps get capacity (docs/scheduling.md). Start-time fair
 * queuing on three levels — between tenants, between a tenant's applications, between an application's
 * fairness keys (its customers, say) — and, within a key, priority aged by waiting. Pure: the
 * scheduler's round reads the rows, these functions decide, the store writes the result
 * (`workers/fairClaim.ts`).
 *
 * Each waiting request carries a tag per level: its place in its tenant's line among all tenants, in its
 * application's line among the tenant's applications, and in its key's line among the application's
 * keys. A flow's next tag is one step (1 / its weight) after the later of its own last tag and the
 * virtual time (the tag last served at that level), so a busy flow queues behind itself while a flow
 * that was idle starts at the front — and never with credit saved up while it was idle. A backlog of
 * 100,000 requests of one tenant therefore takes one turn in every round beside each other tenant's,
 * whatever the number of tenants or requests; and one customer's backlog the same beside the
 * application's other customers. Tasks without a fairness key share one key flow per application.
 */
import type { Arrival, ArrivalTags, FlowState, TaggedRequest, VirtualTimes } from '../facts/ports.ts';

export const tenantFlow = (tenantId: string) => `tenant:${tenantId}`;
export const applicationFlow = (applicationId: string) => `application:${applicationId}`;
export const keyFlow = (applicationId: string, fairnessKey: string) => `key:${applicationId}:${fairnessKey}`;

/**
 * Tags arrivals in the order they came (`arrivals` sorted by `createdAt`), and returns the flows' new
 * last tags. `agingStepMs`: a request of priority p counts as having arrived p steps earlier.
 */
export function tagArrivals(
  arrivals: Arrival[],
  flows: FlowState,
  agingStepMs: number,
): { tags: ArrivalTags[]; lastTags: Map<string, number> } {
  const lastTags = new Map<string, number>();
  const last = (flow: string) => lastTags.get(flow) ?? flows.lastTag.get(flow) ?? 0;
  const weight = (flow: string, own = 1) => flows.weights.get(flow) ?? own;
  const tags = arrivals.map((arrival) => {
    const tenant = tenantFlow(arrival.tenantId);
    const application = applicationFlow(arrival.applicationId);
    const key = keyFlow(arrival.applicationId, arrival.fairnessKey);
    const tenantTag = Math.max(flows.platformServed, last(tenant)) + 1 / weight(tenant);
    const applicationTag =
      Math.max(flows.tenantServed.get(tenant) ?? 0, last(application)) + 1 / weight(application);
    const keyTag =
      Math.max(flows.applicationServed.get(application) ?? 0, last(key)) +
      1 / weight(key, arrival.fairnessWeight);
    lastTags.set(tenant, tenantTag);
    lastTags.set(application, applicationTag);
    lastTags.set(key, keyTag);
    return {
      id: arrival.id,
      tenantTag,
      applicationTag,
      keyTag,
      orderAt: new Date(arrival.createdAt.getTime() - arrival.priority * agingStepMs),
    };
  });
  return { tags, lastTags };
}

/**
 * A round's turns handed to the requests it serves. The round took the lowest tenant tags (`tenantTurns`),
 * then within each tenant as many of its lowest application tags (`applicationTurns`), within each
 * application as many of its lowest key tags (`keyTurns`), then within each key as many of its first
 * requests by order (`served`). A turn is a tag, not a request: the served requests take the turns' tags
 * and the turn holders left waiting take the served ones' tags, so each flow is charged one step per
 * request it is served and keeps its place for the rest.
 * Returns the requests whose tags change, and the served requests with the tags they now hold.
 */
export function handTurns(
  tenantTurns: TaggedRequest[],
  applicationTurns: TaggedRequest[],
  keyTurns: TaggedRequest[],
  served: TaggedRequest[],
): {
  retagged: TaggedRequest[];
  /** The served requests with the tags they now hold, in the order served. */
  served: TaggedRequest[];
} {
  const all = [...tenantTurns, ...applicationTurns, ...keyTurns, ...served];
  const rows = new Map<string, TaggedRequest>();
  for (const r of all) rows.set(r.id, { ...r });
  const servedIds = served.map((r) => r.id);
  swap(rows, tenantTurns, servedIds, (r) => r.tenantId, 'tenantTag');
  swap(rows, applicationTurns, servedIds, (r) => r.applicationId, 'applicationTag');
  swap(rows, keyTurns, servedIds, (r) => keyFlow(r.applicationId, r.fairnessKey), 'keyTag');
  const original = new Map(all.map((r) => [r.id, r]));
  const retagged = [...rows.values()].filter((r) => {
    const before = original.get(r.id)!;
    return (
      before.tenantTag !== r.tenantTag ||
      before.applicationTag !== r.applicationTag ||
      before.keyTag !== r.keyTag
    );
  });
  return { retagged, served: servedIds.map((id) => rows.get(id)!) };
}

/**
 * The virtual times `served` moves the flows to: the latest tenant tag among them, per tenant the latest
 * application tag, per application the latest key tag. Only requests actually placed move them (a round
 * that found no worker for its requests must not make a flow that arrives next queue behind them).
 */
export function virtualTimes(served: TaggedRequest[]): VirtualTimes {
  let platformServed = 0;
  const tenantServed = new Map<string, number>();
  const applicationServed = new Map<string, number>();
  const raise = (map: Map<string, number>, flow: string, tag: number) =>
    map.set(flow, Math.max(map.get(flow) ?? 0, tag));
  for (const r of served) {
    platformServed = Math.max(platformServed, r.tenantTag);
    raise(tenantServed, tenantFlow(r.tenantId), r.applicationTag);
    raise(applicationServed, applicationFlow(r.applicationId), r.keyTag);
  }
  return { platformServed, tenantServed, applicationServed };
}

/**
 * Within each group (a tenant, an application, a key), the served requests take the lowest tags of the
 * group's turn holders and served requests together, in the order they were served; the others the rest.
 */
function swap(
  rows: Map<string, TaggedRequest>,
  turns: TaggedRequest[],
  servedIds: string[],
  groupOf: (r: TaggedRequest) => string,
  tag: 'tenantTag' | 'applicationTag' | 'keyTag',
) {
  const groups = new Map<string, { served: string[]; others: string[] }>();
  const group = (r: TaggedRequest) => {
    const key = groupOf(r);
    if (!groups.has(key)) groups.set(key, { served: [], others: [] });
    return groups.get(key)!;
  };
  const servedSet = new Set(servedIds);
  for (const id of servedIds) group(rows.get(id)!).served.push(id);
  for (const r of turns) if (!servedSet.has(r.id)) group(r).others.push(r.id);
  for (const { served, others } of groups.values()) {
    const ids = [...served, ...others];
    const tags = ids.map((id) => rows.get(id)![tag]).sort((a, b) => a - b);
    ids.forEach((id, i) => {
      rows.get(id)![tag] = tags[i]!;
    });
  }
}

/**
 * Fair share's pure half (`core/workers/fairShare.ts`): how arrivals are tagged, how a round's turns are
 * handed to the requests it serves, and — driving both as the scheduler round does — the share a quiet
 * tenant gets beside a noisy one, an application beside another, and a customer (a fairness key)
 * beside another inside one application.
 */
import { describe, expect, it } from 'vitest';
import type { Arrival, FlowState, TaggedRequest } from '../src/core/facts/ports.ts';
import {
  applicationFlow,
  handTurns,
  keyFlow,
  tagArrivals,
  tenantFlow,
  virtualTimes,
} from '../src/core/workers/fairShare.ts';

const at = new Date('2024-01-01T00:00:00Z');
const noFlows = (): FlowState => ({
  platformServed: 0,
  lastTag: new Map(),
  tenantServed: new Map(),
  applicationServed: new Map(),
  weights: new Map(),
});
let sequence = 0;
const arrival = (
  tenantId: string,
  applicationId = `${tenantId}-app`,
  priority = 0,
  createdAt = at,
  fairnessKey = '',
  fairnessWeight = 1,
): Arrival => ({
  id: `r${++sequence}`,
  tenantId,
  applicationId,
  fairnessKey,
  fairnessWeight,
  priority,
  createdAt,
});
const arrivals = (count: number, tenantId: string, applicationId?: string) =>
  Array.from({ length: count }, () => arrival(tenantId, applicationId));

describe('tagArrivals', () => {
  it('gives each tenant its own line, so two backlogs of 10 and 3 alternate while both wait', () => {
    const noisy = arrivals(10, 'A');
    const quiet = arrivals(3, 'B');
    const { tags, lastTags } = tagArrivals([...noisy, ...quiet], noFlows(), 1000);
    const tenantOf = new Map([...noisy, ...quiet].map((a) => [a.id, a.tenantId]));
    const order = [...tags]
      .sort((x, y) => x.tenantTag - y.tenantTag || (tenantOf.get(x.id)! < tenantOf.get(y.id)! ? -1 : 1))
      .map((t) => tenantOf.get(t.id));
    expect(order.join('')).toBe('ABABABAAAAAAA');
    expect(tags.slice(0, 10).map((t) => t.tenantTag)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    expect(lastTags.get(tenantFlow('A'))).toBe(10);
    expect(lastTags.get(tenantFlow('B'))).toBe(3);
    expect(lastTags.get(applicationFlow('B-app'))).toBe(3);
  });

  it('steps a flow by 1 / its weight: a weight of 2 takes two turns to the others one', () => {
    const flows = noFlows();
    flows.weights.set(tenantFlow('A'), 2);
    flows.weights.set(applicationFlow('A-app'), 4);
    const { tags } = tagArrivals([...arrivals(4, 'A'), ...arrivals(2, 'B')], flows, 1000);
    expect(tags.map((t) => t.tenantTag)).toEqual([0.5, 1, 1.5, 2, 1, 2]);
    expect(tags.map((t) => t.applicationTag)).toEqual([0.25, 0.5, 0.75, 1, 1, 2]);
  });

  it('starts a flow that was idle at the virtual time, with no credit saved while it was idle', () => {
    const flows = noFlows();
    flows.platformServed = 50;
    flows.lastTag.set(tenantFlow('idle'), 3);
    flows.lastTag.set(tenantFlow('busy'), 60);
    flows.tenantServed.set(tenantFlow('idle'), 7);
    flows.lastTag.set(applicationFlow('idle-app'), 2);
    flows.lastTag.set(applicationFlow('other-app'), 9);
    const { tags, lastTags } = tagArrivals(
      [arrival('idle'), arrival('idle'), arrival('busy'), arrival('idle', 'other-app')],
      flows,
      1000,
    );
    // The idle tenant's next tags follow the virtual time (51, 52), not its old last tag (4, 5); the busy
    // one queues behind its own backlog.
    expect(tags.map((t) => t.tenantTag)).toEqual([51, 52, 61, 53]);
    // Within the idle tenant: an idle application starts at the tenant's virtual time, a busy one after itself.
    expect(tags.map((t) => t.applicationTag)).toEqual([8, 9, 1, 10]);
    expect(lastTags.get(tenantFlow('idle'))).toBe(53);
    expect(lastTags.has(tenantFlow('untouched'))).toBe(false);
  });

  it('gives each fairness key its own line within its application, stepped by the task’s weight', () => {
    const flows = noFlows();
    flows.applicationServed.set(applicationFlow('A-app'), 10);
    flows.lastTag.set(keyFlow('A-app', 'busy'), 14);
    const { tags, lastTags } = tagArrivals(
      [
        arrival('A', 'A-app', 0, at, 'busy'),
        arrival('A', 'A-app', 0, at, 'idle'),
        arrival('A', 'A-app', 0, at, 'heavy', 2),
        arrival('A', 'A-app', 0, at, 'heavy', 2),
        arrival('A', 'A-app'),
      ],
      flows,
      1000,
    );
    // A busy key queues behind itself, an idle one starts at the application's virtual time, a weight of
    // 2 steps by a half; tasks without a key share the key ''.
    expect(tags.map((t) => t.keyTag)).toEqual([15, 11, 10.5, 11, 11]);
    expect(lastTags.get(keyFlow('A-app', ''))).toBe(11);
    // The tenant and application levels do not see the keys.
    expect(tags.map((t) => t.applicationTag)).toEqual([1, 2, 3, 4, 5]);
  });

  it('moves a request of priority p p aging steps earlier in its application, and leaves its tags alone', () => {
    const created = new Date('2024-01-01T00:01:00Z');
    const { tags } = tagArrivals(
      [arrival('A', 'A-app', 0, created), arrival('A', 'A-app', 5, created)],
      noFlows(),
      2000,
    );
    expect(tags[0]!.orderAt).toEqual(created);
    expect(tags[1]!.orderAt).toEqual(new Date(created.getTime() - 10_000));
    expect(tags.map((t) => t.tenantTag)).toEqual([1, 2]);
  });
});

const request = (
  id: string,
  tenantId: string,
  applicationId: string,
  tenantTag: number,
  applicationTag: number,
  fairnessKey = '',
  keyTag = applicationTag,
) =>
  ({ id, tenantId, applicationId, fairnessKey, tenantTag, applicationTag, keyTag }) satisfies TaggedRequest;

/** Every tag of a level in the rows, per group, sorted: what handing over turns must not change. */
const tagsPer = (
  rows: TaggedRequest[],
  group: 'tenantId' | 'applicationId',
  tag: 'tenantTag' | 'applicationTag',
) => {
  const out: Record<string, number[]> = {};
  for (const r of rows) out[r[group]] = [...(out[r[group]] ?? []), r[tag]];
  for (const list of Object.values(out)) list.sort((a, b) => a - b);
  return out;
};

describe('handTurns', () => {
  it('gives a served request the turn’s tags and the turn holder left waiting the served one’s', () => {
    // Tenant A's one turn (tag 1) is held by a1, but a3, urgent in the same application, is served.
    // Tenant B's turn is served by its holder.
    const a1 = request('a1', 'A', 'A-x', 1, 1);
    const a3 = request('a3', 'A', 'A-x', 5, 4);
    const b1 = request('b1', 'B', 'B-x', 1, 1);
    const { retagged, served } = handTurns([a1, b1], [a1, b1], [a1, b1], [a3, b1]);
    const { platformServed, tenantServed } = virtualTimes(served);
    const after = new Map(retagged.map((r) => [r.id, r]));
    expect(after.get('a3')).toEqual({ ...a3, tenantTag: 1, applicationTag: 1, keyTag: 1 });
    expect(after.get('a1')).toEqual({ ...a1, tenantTag: 5, applicationTag: 4, keyTag: 4 });
    // b1 kept its own tags: not among the changes.
    expect([...after.keys()].sort()).toEqual(['a1', 'a3']);
    expect(platformServed).toBe(1);
    expect(tenantServed).toEqual(
      new Map([
        [tenantFlow('A'), 1],
        [tenantFlow('B'), 1],
      ]),
    );
  });

  it('hands a tenant’s turns to the requests served at each level, in the order they were served', () => {
    // A's turns (tenant tags 1, 2) are held by a1 and a2; its application turns (application tags 1, 2)
    // both fall to A-x, by a1 and a3, and A-x serves a3 (urgent) then a1. a2, in A-y, waits.
    const a1 = request('a1', 'A', 'A-x', 1, 1);
    const a2 = request('a2', 'A', 'A-y', 2, 3);
    const a3 = request('a3', 'A', 'A-x', 5, 2);
    const b1 = request('b1', 'B', 'B-x', 1, 1);
    const { retagged, served } = handTurns([a1, b1, a2], [a1, a3, b1], [a1, a3, b1], [a3, a1, b1]);
    const { platformServed, tenantServed } = virtualTimes(served);
    const after = new Map(retagged.map((r) => [r.id, r]));
    expect(after.get('a3')).toMatchObject({ tenantTag: 1, applicationTag: 1 });
    expect(after.get('a1')).toMatchObject({ tenantTag: 2, applicationTag: 2 });
    // a2 takes the tenant tag a3 left, and keeps its place in A-y (no turn of A-y was served).
    expect(after.get('a2')).toMatchObject({ tenantTag: 5, applicationTag: 3 });
    expect(after.has('b1')).toBe(false);
    expect(platformServed).toBe(2);
    expect(tenantServed.get(tenantFlow('A'))).toBe(2);
  });

  it('keeps every tenant’s and application’s tags, only moving them between its requests', () => {
    const turns = [
      request('a1', 'A', 'A-x', 1, 1),
      request('a2', 'A', 'A-x', 2, 2),
      request('a3', 'A', 'A-y', 3, 1),
      request('b1', 'B', 'B-x', 1.5, 1),
      request('b2', 'B', 'B-y', 2.5, 3),
    ];
    const served = [
      request('a4', 'A', 'A-x', 9, 7),
      request('a3', 'A', 'A-y', 3, 1),
      request('b3', 'B', 'B-y', 4, 8),
    ];
    const { retagged } = handTurns(turns, turns, turns, served);
    const before = [...turns, served[0]!, served[2]!];
    const changed = new Map(retagged.map((r) => [r.id, r]));
    const after = before.map((r) => changed.get(r.id) ?? r);
    expect(tagsPer(after, 'tenantId', 'tenantTag')).toEqual(tagsPer(before, 'tenantId', 'tenantTag'));
    expect(tagsPer(after, 'applicationId', 'applicationTag')).toEqual(
      tagsPer(before, 'applicationId', 'applicationTag'),
    );
    // Each served request holds one of the lowest tags of its tenant.
    const servedTags = (tenant: string) =>
      after.filter((r) => r.tenantId === tenant && served.some((s) => s.id === r.id)).map((r) => r.tenantTag);
    expect(servedTags('A').sort()).toEqual([1, 2]);
    expect(servedTags('B')).toEqual([1.5]);
  });

  it('changes nothing when the turn holders are the ones served', () => {
    const rows = [request('a1', 'A', 'A-x', 1, 1), request('b1', 'B', 'B-x', 2, 3)];
    const { retagged, served } = handTurns(rows, rows, rows, rows);
    const { platformServed, tenantServed } = virtualTimes(served);
    expect(retagged).toEqual([]);
    expect(platformServed).toBe(2);
    expect(tenantServed.get(tenantFlow('B'))).toBe(3);
  });

  it('hands an application’s turns between its keys, and moves the application’s virtual time', () => {
    // A-x's two turns: key tags 1 (x1, key c1) and 2 (x2, key c2). Key c1 serves x3 (urgent), c2 its x2.
    const x1 = request('x1', 'A', 'A-x', 1, 1, 'c1', 1);
    const x2 = request('x2', 'A', 'A-x', 2, 2, 'c2', 2);
    const x3 = request('x3', 'A', 'A-x', 3, 3, 'c1', 6);
    const { retagged, served } = handTurns([x1, x2], [x1, x2], [x1, x2], [x3, x2]);
    const after = new Map(retagged.map((r) => [r.id, r]));
    expect(after.get('x3')).toMatchObject({ keyTag: 1 });
    expect(after.get('x1')).toMatchObject({ keyTag: 6 });
    expect(after.has('x2')).toBe(false);
    expect(virtualTimes(served).applicationServed).toEqual(new Map([[applicationFlow('A-x'), 2]]));
  });
});

/**
 * The scheduler round over rows kept in memory, as `fairClaim.ts` runs it over the table: tag the
 * arrivals, take the `capacity` lowest tenant tags, within each tenant as many lowest application tags,
 * within each application as many first by order; hand the turns over; keep the virtual times (never
 * moved back). Ties go to the earlier arrival.
 */
function simulate(options: {
  ticks: number;
  capacity: number;
  /** Tenant, application, arrivals per tick, and their fairness key and weight. */
  perTick: [string, string, number, string?, number?][];
}) {
  type Waiting = TaggedRequest & { orderAt: number; seq: number };
  const flows = noFlows();
  let waiting: Waiting[] = [];
  const servedBy = new Map<string, number>();
  const lowest = (rows: Waiting[], key: (r: Waiting) => number, count: number) =>
    [...rows].sort((x, y) => key(x) - key(y) || x.seq - y.seq).slice(0, count);
  const countBy = (rows: Waiting[], group: (r: Waiting) => string) => {
    const counts = new Map<string, number>();
    for (const r of rows) counts.set(group(r), (counts.get(group(r)) ?? 0) + 1);
    return counts;
  };
  for (let tick = 0; tick < options.ticks; tick++) {
    const createdAt = new Date(at.getTime() + tick * 1000);
    const arrived: Arrival[] = options.perTick.flatMap(([tenantId, applicationId, count, key, weight]) =>
      Array.from({ length: count }, () => arrival(tenantId, applicationId, 0, createdAt, key, weight)),
    );
    const { tags, lastTags } = tagArrivals(arrived, flows, 1000);
    for (const [flow, tag] of lastTags) flows.lastTag.set(flow, tag);
    for (const [i, t] of tags.entries())
      waiting.push({ ...arrived[i]!, ...t, orderAt: t.orderAt.getTime(), seq: Number(t.id.slice(1)) });

    const tenantTurns = lowest(waiting, (r) => r.tenantTag, options.capacity);
    const applicationTurns = [...countBy(tenantTurns, (r) => r.tenantId)].flatMap(([tenant, turns]) =>
      lowest(
        waiting.filter((r) => r.tenantId === tenant),
        (r) => r.applicationTag,
        turns,
      ),
    );
    const keyTurns = [...countBy(applicationTurns, (r) => r.applicationId)].flatMap(([application, turns]) =>
      lowest(
        waiting.filter((r) => r.applicationId === application),
        (r) => r.keyTag,
        turns,
      ),
    );
    const keyOf = (r: Waiting) => keyFlow(r.applicationId, r.fairnessKey);
    const served = [...countBy(keyTurns, keyOf)].flatMap(([key, turns]) =>
      lowest(
        waiting.filter((r) => keyOf(r) === key),
        (r) => r.orderAt,
        turns,
      ),
    );
    const handed = handTurns(tenantTurns, applicationTurns, keyTurns, served);
    const retagged = new Map(handed.retagged.map((r) => [r.id, r]));
    const servedIds = new Set(served.map((r) => r.id));
    waiting = waiting
      .filter((r) => !servedIds.has(r.id))
      .map((r) => {
        const moved = retagged.get(r.id);
        return moved
          ? { ...r, tenantTag: moved.tenantTag, applicationTag: moved.applicationTag, keyTag: moved.keyTag }
          : r;
      });
    const times = virtualTimes(handed.served);
    flows.platformServed = Math.max(flows.platformServed, times.platformServed);
    for (const [flow, tag] of times.tenantServed)
      flows.tenantServed.set(flow, Math.max(flows.tenantServed.get(flow) ?? 0, tag));
    for (const [flow, tag] of times.applicationServed)
      flows.applicationServed.set(flow, Math.max(flows.applicationServed.get(flow) ?? 0, tag));
    for (const r of served) {
      const by = r.fairnessKey ? `${r.applicationId}/${r.fairnessKey}` : r.applicationId;
      servedBy.set(by, (servedBy.get(by) ?? 0) + 1);
    }
  }
  return { servedBy, total: options.ticks * options.capacity };
}

describe('fair share over a run (tenant A submits 10 per tick, tenant B 1)', () => {
  const ticks = 200;
  const tolerance = 0.02;

  it.each([
    // capacity per tick, B's expected share of it: min(its demand, half) / capacity
    [1, 0.5],
    [2, 0.5],
    [4, 0.25],
    [8, 0.125],
  ])('with capacity %i per tick, B gets a share of %f (±0.02)', (capacity, expected) => {
    const { servedBy, total } = simulate({
      ticks,
      capacity,
      perTick: [
        ['A', 'A-app', 10],
        ['B', 'B-app', 1],
      ],
    });
    const quietShare = (servedBy.get('B-app') ?? 0) / total;
    expect(Math.abs(quietShare - expected)).toBeLessThanOrEqual(tolerance);
    // Capacity is never left idle while A has a backlog.
    expect((servedBy.get('A-app') ?? 0) + (servedBy.get('B-app') ?? 0)).toBe(total);
  });

  it('shares a tenant’s turns between its applications the same way (9:1 inside A, beside B)', () => {
    const { servedBy, total } = simulate({
      ticks,
      capacity: 4,
      perTick: [
        ['A', 'A-noisy', 9],
        ['A', 'A-quiet', 1],
        ['B', 'B-app', 10],
      ],
    });
    // A and B each get half (2 per tick); A's quiet application gets its demand, 1 of A's 2.
    const share = (application: string) => (servedBy.get(application) ?? 0) / total;
    expect(Math.abs(share('B-app') - 0.5)).toBeLessThanOrEqual(tolerance);
    expect(Math.abs(share('A-quiet') - 0.25)).toBeLessThanOrEqual(tolerance);
    expect(Math.abs(share('A-noisy') - 0.25)).toBeLessThanOrEqual(tolerance);
  });

  it('shares an application’s turns between its customers (fairness keys) the same way, by weight', () => {
    const { servedBy, total } = simulate({
      ticks,
      capacity: 4,
      perTick: [
        ['A', 'A-app', 9, 'flooding'],
        ['A', 'A-app', 1, 'quiet'],
        ['A', 'A-app', 10, 'paid', 2],
      ],
    });
    // 4 turns a tick, all A's: the quiet customer gets its demand (1); the rest is shared 1:2 by weight.
    const share = (key: string) => (servedBy.get(`A-app/${key}`) ?? 0) / total;
    expect(Math.abs(share('quiet') - 0.25)).toBeLessThanOrEqual(tolerance);
    expect(Math.abs(share('flooding') - 0.25)).toBeLessThanOrEqual(tolerance);
    expect(Math.abs(share('paid') - 0.5)).toBeLessThanOrEqual(tolerance);
  });
});

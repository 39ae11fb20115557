/**
 * The scheduler round's claim: the requests that arrived since the last round are tagged, then the round
 * takes its turns in fair order and hand them to the requests they serve (`fairShare.ts` decides, the transaction
 * reads and writes). Every replica runs it on the same rows, so N replicas place in the same order.
 */
import type { ClaimedSchedulingRequest, FactTransaction } from '../facts/ports.ts';
import { handTurns, tagArrivals, virtualTimes } from './fairShare.ts';

/** Arrivals tagged per round at most; the rest are tagged by the next rounds, oldest first. */
const arrivalsPerRound = 5_000;

/**
 * Tags the requests that arrived since the last round, in a transaction of its own before the round's
 * (one replica at a time: the round's transaction waits on task locks, and would hold up the others'
 * tagging that long). Returns how many it tagged.
 */
export async function tagNewRequests(tx: FactTransaction, agingStepMs: number): Promise<number> {
  const pending = await tx.schedulingArrivals(arrivalsPerRound);
  if (!pending || pending.arrivals.length === 0) return 0;
  const { tags, lastTags } = tagArrivals(pending.arrivals, pending.flows, agingStepMs);
  await tx.writeArrivalTags(pending.arrivals, tags, lastTags);
  return tags.length;
}

/**
 * The round's turns, handed to the requests they serve (in the round's transaction); `placed` is to be
 * called once the round knows which of them it placed, to move the virtual times by those.
 */
export async function claimFairly(
  tx: FactTransaction,
  now: Date,
  limit: number,
  options: { untriedOnly: boolean },
): Promise<{ claimed: ClaimedSchedulingRequest[]; placed: (ids: ReadonlySet<string>) => Promise<void> }> {
  const turns = await tx.schedulingTurns(now, limit, options);
  if (turns.served.length === 0) return { claimed: [], placed: async () => {} };
  const handed = handTurns(turns.tenantTurns, turns.applicationTurns, turns.keyTurns, turns.served);
  await tx.writeTurns(handed.retagged, null);
  return {
    claimed: turns.claimed,
    placed: async (ids) => {
      const placed = handed.served.filter((r) => ids.has(r.id));
      if (placed.length === 0) return;
      await tx.writeTurns([], virtualTimes(placed));
    },
  };
}

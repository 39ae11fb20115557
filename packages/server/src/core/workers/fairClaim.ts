/**
 * The scheduler round's claim: tag the requests that arrived since the last round, then take the round's
 * turns in fair order and hand them to the requests they serve (`fairShare.ts` decides, the transaction
 * reads and writes). Every replica runs it on the same rows, so N replicas place in the same order.
 */
import type { ClaimedSchedulingRequest, FactTransaction } from '../facts/ports.ts';
import { handTurns, tagArrivals } from './fairShare.ts';

/** Arrivals tagged per round at most; the rest are tagged by the next rounds, oldest first. */
const arrivalsPerRound = 5_000;

export async function claimFairly(
  tx: FactTransaction,
  now: Date,
  limit: number,
  agingStepMs: number,
): Promise<ClaimedSchedulingRequest[]> {
  const pending = await tx.schedulingArrivals(arrivalsPerRound);
  if (pending && pending.arrivals.length > 0) {
    const { tags, lastTags } = tagArrivals(pending.arrivals, pending.flows, agingStepMs);
    await tx.writeArrivalTags(pending.arrivals, tags, lastTags);
  }
  const turns = await tx.schedulingTurns(now, limit);
  if (turns.served.length === 0) return [];
  const handed = handTurns(turns.tenantTurns, turns.applicationTurns, turns.served);
  await tx.writeTurns(handed.retagged, { platform: handed.platformServed, tenants: handed.tenantServed });
  return turns.claimed;
}

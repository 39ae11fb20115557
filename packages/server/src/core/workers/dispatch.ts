import type { DeferredRequest } from '../facts/ports.ts';
import type { TaskState, WorkerCommandRecord } from '../facts/records.ts';
import { inFactTransaction } from '../facts/session.ts';
import type { FactConsequenceDeps } from '../orchestration/consequences.ts';
import { isRunningMap, placeMapItems } from '../orchestration/kinds/map.ts';
import {
  lockCandidates,
  placementPoolLocks,
  placeStep,
  type StartRefusal,
  waitingForWorker,
} from '../orchestration/placement.ts';
import { claimFairly, tagNewRequests } from './fairClaim.ts';
import type { WorkerStore } from './ports.ts';
import { freeSlots } from './selector.ts';

export interface DispatchDeps {
  status: FactConsequenceDeps;
  workers: WorkerStore;
  heartbeatTtlMs: number;
  /** Called after the commit with the commands it wrote, for the workers' open streams. */
  wake: (commands: WorkerCommandRecord[]) => void;
  retryUnplaceableMs: number;
  /** A step of priority p is placed as if it had waited p times this long (docs/scheduling.md). */
  agingStepMs: number;
  /** Called when worker sessions were ended (lost), so no placement trusts an older view of them. */
  workersEnded?: () => void;
  /** Called after each round; `full` means more requests are waiting. */
  roundDone?: (full: boolean) => void;
  /**
   * The freed-capacity wake-up (`CapacityWakeup`): a round that deferred requests while capacity was
   * freed asks for another retry of the deferred once its deferral has committed.
   */
  capacity?: { readonly generation: number; freed(): void };
}

/**
 * One round: up to `limit` requests, and no more than the workers have free slots for. When none has
 * one, only requests never tried yet (up to `limit`), so that every waiting step gets its reasons; a
 * step that waits only for a busy worker then stays due, to take its fair turn when a slot frees rather
 * than after a retry interval behind newer steps. Returns how many were claimed (placed, deferred or
 * closed); fewer than `limit` means the round is not full.
 */
export async function dispatchReady(deps: DispatchDeps, limit: number): Promise<number> {
  const sent: WorkerCommandRecord[] = [];
  const freedBefore = deps.capacity?.generation ?? 0;
  let deferredAny = false;
  const parkedOn: { tenantId: string; name: string; value: string }[] = [];
  await deps.status.store.transaction((tx) => tagNewRequests(tx, deps.agingStepMs));
  const candidates = await deps.workers.candidates();
  const free = freeSlots(candidates, deps.status.clock.now(), deps.heartbeatTtlMs);
  const claimLimit = free > 0 ? Math.min(limit, free) : limit;
  const claimed = await inFactTransaction(
    deps.status,
    async (session) => {
      const { claimed: requests, placed } = await claimFairly(session.tx, session.now, claimLimit, {
        untriedOnly: free === 0,
      });
      const placedIds = new Set<string>();
      const now = session.now;
      // Every claimed step's advisory lock, the free workers' capacity (placement.ts: locked before any
      // task; none for an empty round) and the task locks, in one round trip; then no reads until commit.
      const [, reserved] = await Promise.all([
        session.tx.advisoryLocks(requests.map((r) => `dispatch:${r.stepId}`)),
        lockCandidates(deps, session, requests.length > 0 ? candidates : [], { mode: 'all' }),
        session.prefetch(
          requests.map((r) => r.taskId),
          [],
          { workflows: true },
        ),
      ]);
      // The pools the round may place on, locked in one sorted call before any placement (placement.ts).
      const states = await Promise.all(requests.map((r) => session.lockTask(r.taskId)));
      await session.tx.advisoryLocks(
        requests.flatMap((r, i) => (states[i] ? placementPoolLocks(states[i], r.stepId) : [])),
      );
      const deferred: DeferredRequest[] = [];
      const deferral = (request: { id: string }, refused: StartRefusal): DeferredRequest => ({
        id: request.id,
        reasons: refused.reasons,
        ...(refused.parkedOn ? { parkedOn: refused.parkedOn } : {}),
        ...(refused.availableAt ? { availableAt: refused.availableAt } : {}),
        // Every worker was busy when the round began: it stays due for the next free slot. (With a
        // free slot that could not take it, it waits its retry, or it would hold the slot's turn.)
        ...(free === 0 && refused.waitsForCapacity ? { availableAt: now } : {}),
      });
      // The timeline says a step waits for a worker, and why, when the reason is new (placement.ts).
      const sayWaiting = async (
        state: TaskState,
        request: { stepId: string; reasons: string[] },
        reasons: string[],
      ) => {
        const record = waitingForWorker(
          deps.status.ids,
          state,
          request.stepId,
          request.reasons,
          reasons,
          now,
        );
        if (record) await session.write({ timeline: [record] });
      };
      for (const request of requests) {
        const before = await session.lockTask(request.taskId);
        const step = before?.steps.find((s) => s.id === request.stepId);
        if (before && isRunningMap(step)) {
          // A map step's request places a round of its items (kinds/map.ts).
          const placement = await placeMapItems(deps, session, before, step, reserved);
          if (placement.kind === 'placed') {
            sent.push(...placement.commands);
            placedIds.add(request.id);
          }
          const waits =
            placement.kind === 'placed'
              ? placement.waits
              : placement.kind === 'unplaceable'
                ? placement
                : null;
          if (waits) deferred.push(deferral(request, waits));
          // Its items held by a key or a rate limit say so too (the request keeps its reasons, so once).
          if (waits && (placement.kind === 'unplaceable' || waits.parkedOn || waits.availableAt))
            await sayWaiting(before, request, waits.reasons);
          continue;
        }
        const placement = await placeStep(deps, session, before, request.stepId, reserved, true);
        if (placement.kind === 'placed') {
          sent.push(placement.command);
          placedIds.add(request.id);
        } else if (placement.kind === 'stale')
          await session.write({
            closeSchedulingRequests: { stepIds: [request.stepId], status: 'CANCELLED' },
          });
        else if (placement.kind === 'unplaceable' && before) {
          deferred.push(deferral(request, placement));
          await sayWaiting(before, request, placement.reasons);
        }
      }
      // All of the round's unplaceable requests in one statement (with no worker up, that is every one).
      if (deferred.length > 0)
        await session.tx.deferSchedulingRequests(deferred, new Date(now.getTime() + deps.retryUnplaceableMs));
      deferredAny = deferred.length > 0;
      for (const { id, parkedOn: pool } of deferred) {
        const tenantId = requests.find((r) => r.id === id)!.tenantId;
        if (pool) parkedOn.push({ tenantId, name: pool.name, value: pool.value });
      }
      await placed(placedIds);
      return requests.length;
    },
    { deferWrites: true },
  );
  if (sent.length > 0) deps.wake(sent);
  // A slot given back while this round parked steps on its pool did not see them parked: look again
  // now that they are (the leases loop's recheck is the net; this keeps the wait short).
  if (parkedOn.length > 0 && (await deps.workers.unparkWithRoom(deps.status.clock.now(), parkedOn)) > 0)
    deps.capacity?.freed();
  if (deferredAny && deps.capacity && deps.capacity.generation !== freedBefore) deps.capacity.freed();
  // Steps still wait for capacity: new tasks leave their steps to the scheduler's fair order.
  deps.roundDone?.(claimed === claimLimit || deferredAny);
  return claimed;
}

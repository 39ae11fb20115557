import { describe, expect, it } from 'vitest';
import { CandidateSnapshot } from '../src/core/workers/candidateSnapshot.ts';
import type { WorkerCandidate } from '../src/core/workers/selector.ts';

const worker = (workerId: string): WorkerCandidate => ({
  workerId,
  nodeId: `node-${workerId}`,
  nodeStatus: 'ACTIVE',
  nodeLabels: {},
  nodeGroup: null,
  weight: 100,
  runtimeState: 'READY',
  schedulingStatus: 'ELIGIBLE',
  lastHeartbeatAt: new Date(),
  capabilities: [{ name: 'op', version: '1' }],
  runningAttempts: 0,
  runningByCapability: {},
  maxConcurrency: 4,
  freeResources: { cpuMillis: 1000, memoryMb: 1000, gpus: 0 },
});

/** A snapshot whose reads the test answers one by one, on a clock the test moves. */
function setup() {
  let now = 0;
  const reads: ((candidates: WorkerCandidate[]) => void)[] = [];
  const snapshot = new CandidateSnapshot(
    () => new Promise((resolve) => reads.push(resolve)),
    1_000,
    () => now,
  );
  const answer = async (candidates: WorkerCandidate[]) => {
    reads.shift()!(candidates);
    await new Promise((r) => setImmediate(r));
  };
  return { snapshot, reads, answer, move: (ms: number) => (now += ms) };
}

describe('the worker candidate snapshot', () => {
  it('has nothing until its first read, then serves it while fresh and renews it past half its age', async () => {
    const { snapshot, reads, answer, move } = setup();
    expect(snapshot.current()).toBeNull();
    expect(reads).toHaveLength(1);
    expect(snapshot.current()).toBeNull();
    expect(reads).toHaveLength(1);
    await answer([worker('a')]);
    expect(snapshot.current()?.map((c) => c.workerId)).toEqual(['a']);
    expect(reads).toHaveLength(0);
    move(600);
    expect(snapshot.current()?.map((c) => c.workerId)).toEqual(['a']);
    expect(reads).toHaveLength(1);
    move(500);
    expect(snapshot.current()).toBeNull();
    await answer([worker('b')]);
    expect(snapshot.current()?.map((c) => c.workerId)).toEqual(['b']);
  });

  it('after a worker change, drops what it had and discards a read that began before the change', async () => {
    const { snapshot, reads, answer } = setup();
    snapshot.current();
    await answer([worker('a')]);
    snapshot.invalidate();
    expect(snapshot.current()).toBeNull();
    expect(reads).toHaveLength(1);
    snapshot.invalidate();
    await answer([worker('old')]);
    expect(snapshot.current()).toBeNull();
    expect(reads).toHaveLength(1);
    await answer([worker('new')]);
    expect(snapshot.current()?.map((c) => c.workerId)).toEqual(['new']);
  });

  it('gives nothing while the scheduler has a backlog, so new steps queue behind older ones', async () => {
    const { snapshot, answer } = setup();
    snapshot.current();
    await answer([worker('a')]);
    snapshot.schedulerRound(true);
    expect(snapshot.current()).toBeNull();
    snapshot.schedulerRound(false);
    expect(snapshot.current()).not.toBeNull();
  });
});

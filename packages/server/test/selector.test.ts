import { describe, expect, it } from 'vitest';
import {
  freeSlots,
  type PlacementRequest,
  selectWorker,
  type WorkerCandidate,
  withLockedLoads,
  workersToLock,
} from '../src/core/workers/selector.ts';

const now = new Date('2026-01-01T00:00:00Z');
const worker = (overrides: Partial<WorkerCandidate> = {}): WorkerCandidate => ({
  workerId: 'w1',
  nodeId: 'node-a',
  nodeStatus: 'ACTIVE',
  nodeLabels: {},
  nodeGroup: null,
  weight: 100,
  runtimeState: 'READY',
  schedulingStatus: 'ELIGIBLE',
  lastHeartbeatAt: now,
  capabilities: [{ name: 'image.watermark', version: '2' }],
  runningAttempts: 0,
  runningByCapability: {},
  maxConcurrency: 4,
  freeResources: { cpuMillis: 2000, memoryMb: 4096, gpus: 0 },
  ...overrides,
});
const request = (affinity: PlacementRequest['affinity'] = {}): PlacementRequest => ({
  capability: 'image.watermark',
  capabilityVersion: '2',
  affinity,
});
const select = (candidates: WorkerCandidate[], affinity: PlacementRequest['affinity'] = {}) =>
  selectWorker(candidates, request(affinity), now, 30_000);

describe('worker selection', () => {
  it.each([
    ['node pinned elsewhere', worker(), { nodeId: 'node-b' }, 'not on node node-b'],
    ['wrong group', worker({ nodeGroup: 'cpu' }), { group: 'gpu' }, 'not in group gpu'],
    ['cordoned node', worker({ nodeStatus: 'CORDONED' }), {}, 'node node-a is CORDONED'],
    ['draining worker', worker({ runtimeState: 'DRAINING' }), {}, 'worker is DRAINING'],
    ['ineligible worker', worker({ schedulingStatus: 'INELIGIBLE' }), {}, 'worker is not eligible'],
    [
      'stale heartbeat',
      worker({ lastHeartbeatAt: new Date(now.getTime() - 31_000) }),
      {},
      'worker heartbeat is stale',
    ],
    [
      'other capability version',
      worker({ capabilities: [{ name: 'image.watermark', version: '1' }] }),
      {},
      'no worker offers image.watermark@2',
    ],
    [
      'missing required label',
      worker({ nodeLabels: { gpu: 'false' } }),
      { requiredLabels: { gpu: 'true' } },
      'required label gpu=true matches no active node',
    ],
    ['full', worker({ runningAttempts: 4 }), {}, 'w1: worker is at its concurrency limit'],
    [
      'full for this capability',
      worker({
        capabilities: [{ name: 'image.watermark', version: '2', maxConcurrency: 1 }],
        runningAttempts: 1,
        runningByCapability: { 'image.watermark': 1 },
      }),
      {},
      'w1: worker is at its concurrency limit for image.watermark',
    ],
    ['not enough memory', worker(), { minimumResources: { memoryMb: 8192 } }, 'w1: needs 8192 MB memory'],
    ['no GPU', worker(), { minimumResources: { gpus: 1 } }, 'w1: needs 1 GPU'],
  ])('filters out a worker: %s', (_name, candidate, affinity, reason) => {
    const result = select([candidate], affinity);
    expect(result.ok).toBe(false);
    expect(result.ok ? [] : result.reasons.join(' | ')).toContain(reason);
  });

  it("a capability's own limit counts only its attempts; others fill the worker's limit", () => {
    const mixed = worker({
      capabilities: [
        { name: 'image.watermark', version: '2', maxConcurrency: 1 },
        { name: 'http.fetch', version: '1' },
      ],
      runningAttempts: 2,
      runningByCapability: { 'http.fetch': 2 },
    });
    expect(select([mixed])).toMatchObject({ ok: true, workerId: 'w1' });
    const fetch = { capability: 'http.fetch', capabilityVersion: '1', affinity: {} };
    const watermarking = {
      ...mixed,
      runningAttempts: 3,
      runningByCapability: { 'http.fetch': 2, 'image.watermark': 1 },
    };
    expect(select([watermarking]).ok).toBe(false);
    expect(selectWorker([watermarking], fetch, now, 30_000)).toMatchObject({ ok: true });
    expect(selectWorker([{ ...watermarking, runningAttempts: 4 }], fetch, now, 30_000).ok).toBe(false);
  });

  it('explains an empty cluster', () => {
    expect(select([])).toEqual({ ok: false, reasons: ['no worker is registered'], waitsForCapacity: false });
  });

  it('scores preferred labels, then weight, minus running attempts; ties go to the lowest node id', () => {
    const labelled = worker({
      workerId: 'labelled',
      nodeId: 'node-z',
      nodeLabels: { ssd: 'true' },
      weight: 1,
    });
    const heavy = worker({ workerId: 'heavy', nodeId: 'node-y', weight: 500 });
    expect(select([heavy, labelled], { preferredLabels: { ssd: 'true' } })).toMatchObject({
      ok: true,
      workerId: 'labelled',
      score: 1_001_000,
    });
    expect(select([heavy, labelled])).toMatchObject({ ok: true, workerId: 'heavy', score: 500_000 });
    const busy = worker({ workerId: 'busy', nodeId: 'node-a', runningAttempts: 3 });
    const idle = worker({ workerId: 'idle', nodeId: 'node-b' });
    expect(select([busy, idle])).toMatchObject({ workerId: 'idle' });
    const tieB = worker({ workerId: 'x', nodeId: 'node-b' });
    const tieA = worker({ workerId: 'y', nodeId: 'node-a' });
    expect(select([tieB, tieA])).toMatchObject({ workerId: 'y', nodeId: 'node-a' });
  });
});

describe('free slots', () => {
  it('sums the free slots of the workers that can take work now, and only theirs', () => {
    const stale = new Date(now.getTime() - 31_000);
    expect(
      freeSlots(
        [
          worker({ runningAttempts: 1 }), // 3
          worker({ workerId: 'w2', runningAttempts: 6, maxConcurrency: 4 }), // over its limit: 0, not −2
          worker({ workerId: 'w3', maxConcurrency: 10 }), // 10
          worker({ workerId: 'w4', runtimeState: 'DRAINING' }),
          worker({ workerId: 'w5', nodeStatus: 'CORDONED' }),
          worker({ workerId: 'w6', schedulingStatus: 'INELIGIBLE' }),
          worker({ workerId: 'w7', lastHeartbeatAt: stale }),
        ],
        now,
        30_000,
      ),
    ).toBe(13);
    expect(freeSlots([], now, 30_000)).toBe(0);
  });
});

describe('hard capacity: the workers a placing transaction locks, and its view after the lock', () => {
  const busy = worker({ workerId: 'w-busy', runningAttempts: 3 });
  const idle = worker({ workerId: 'w-idle', nodeId: 'node-b' });
  const full = worker({ workerId: 'w-full', runningAttempts: 4 });
  const draining = worker({ workerId: 'w-draining', runtimeState: 'DRAINING' });
  const other = worker({ workerId: 'w-other', capabilities: [{ name: 'archive.clean', version: '1' }] });

  it('names the free-looking workers, least loaded first, offering the asked capabilities', () => {
    const all = [busy, idle, full, draining, other];
    // Ties by node id, then worker id.
    expect(workersToLock(all, now, 30_000)).toEqual(['w-other', 'w-idle', 'w-busy']);
    expect(workersToLock(all, now, 30_000, ['image.watermark'])).toEqual(['w-idle', 'w-busy']);
  });

  it('places on a locked worker by its count under the lock; a free one not locked counts as full', () => {
    const view = withLockedLoads(
      [busy, idle, draining],
      new Map([['w-busy', { running: 4, byCapability: { 'image.watermark': 4 } }]]),
      now,
      30_000,
    );
    // Another placer filled w-busy since the read; w-idle was not locked; neither takes the step, and
    // it waits only for capacity (a busy worker would take it).
    expect(selectWorker(view, request(), now, 30_000)).toMatchObject({ ok: false, waitsForCapacity: true });
    expect(view.map((c) => c.runningAttempts)).toEqual([4, 4, 0]);
    // The reasons for a worker that takes no work stay its own.
    expect(selectWorker([view[2]!], request(), now, 30_000)).toEqual({
      ok: false,
      reasons: ['w-draining: worker is DRAINING'],
      waitsForCapacity: false,
    });
    expect(idle.runningAttempts).toBe(0);
  });
});

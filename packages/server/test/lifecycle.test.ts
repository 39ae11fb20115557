/**
 * The server as a list of features: started with every feature on (the loops, NATS, gRPC, the
 * development provider, a notification webhook, an archive, a Temporal address it keeps trying), and
 * stopped, it stops the features in the reverse of their start order and leaves no handle open.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { startHarness } from '../../../test/harness.ts';
import { natsUrl, requireNats } from '../../../test/nats.ts';
import { features } from '../src/main.ts';

/** What keeps the process alive, by kind: sockets, servers, timers, child processes. */
function openHandles(): Map<string, number> {
  const counts = new Map<string, number>();
  for (const kind of process.getActiveResourcesInfo()) counts.set(kind, (counts.get(kind) ?? 0) + 1);
  return counts;
}

const natsAnswers = await requireNats();

describe.skipIf(!natsAnswers)('a server with every feature on', () => {
  it('stops its features last to first and leaves no handle open', async () => {
    const folder = await mkdtemp(join(tmpdir(), 'tdp-lifecycle-'));
    const lines: { feature?: string; msg: string }[] = [];
    const logger = pino(
      { level: 'debug' },
      { write: (line: string) => lines.push(JSON.parse(line) as { feature?: string; msg: string }) },
    );
    const before = openHandles();
    const harness = await startHarness({
      runLoops: true,
      logger,
      nats: { url: natsUrl, subjectPrefix: `lifecycle${Date.now()}` },
      // Nothing answers there: the engine keeps trying in the background, and its stop ends that.
      temporal: { address: '127.0.0.1:1', namespace: 'default', taskQueue: 'lifecycle' },
      developmentFiles: { directory: folder, providerToken: 'lifecycle-provider-token' },
      settings: {
        notificationDelivery: {
          webhookUrl: 'http://127.0.0.1:1/hook',
          maxAttempts: 1,
          maxBackoffSeconds: 1,
          timeoutMs: 100,
        },
      },
    });
    expect(harness.server.grpcPort).toBeGreaterThan(0);
    expect((await harness.request('GET', '/readyz')).status).toBe(200);
    const loops = harness.server.health.loops.map((loop) => loop.health().name);
    // Every loop of the features on here runs (a new feature's own loops may join them).
    expect(loops).toEqual(
      expect.arrayContaining([
        'bulkJobs',
        'callbacks',
        'chart-sampler',
        'health',
        'leases',
        'notifications',
        'outbox',
        'realtime',
        'retention',
        'scheduler',
        'schedules',
        'timers',
      ]),
    );

    await harness.close();
    const stopped = lines.filter((line) => line.msg === 'feature stopped').map((line) => line.feature);
    expect(stopped).toEqual(features.map((feature) => feature.name).reverse());

    // Timers that were unref'd and due within a few hundred milliseconds may still run out.
    await new Promise((resolve) => setTimeout(resolve, 500));
    const after = openHandles();
    const left = [...after].filter(([kind, count]) => count > (before.get(kind) ?? 0));
    expect(left).toEqual([]);
    await rm(folder, { recursive: true, force: true });
  });
});

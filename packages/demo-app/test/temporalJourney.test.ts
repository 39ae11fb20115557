/**
 * One task's whole journey on both engines: the demo app's "clean then watermark" order, once with TDP's
 * native engine and once on Temporal (fed from NATS JetStream), with the real worker process, real ZIPs
 * and images. Both end SUCCEEDED with the same facts, the same callbacks and the same result file.
 */
import { randomUUID } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { requireNats } from '../../../test/nats.ts';
import { onTemporal, requireTemporal, startTemporal, type TemporalProcess } from '../../../test/temporal.ts';
import { readZip } from '../../capabilities/test/zips.ts';
import { type DemoWorld, startDemoWorld, visitor } from './support.ts';

const natsAnswers = await requireNats();
const binary = requireTemporal();

let temporal: TemporalProcess;
let native: DemoWorld;
let onTemporalWorld: DemoWorld;

beforeAll(async () => {
  if (!binary || !natsAnswers) return;
  temporal = await startTemporal(binary);
  onTemporalWorld = await startDemoWorld({ harness: onTemporal(temporal.address) });
  native = await startDemoWorld();
}, 180_000);

// Two worlds, each a server, a demo app and a worker process, then Temporal: on a loaded 2-core machine
// (the whole suite, two files at a time) their closes together have taken over a minute.
afterAll(async () => {
  await Promise.all([onTemporalWorld?.close(), native?.close()]);
  await temporal?.stop();
}, 120_000);

interface Journey {
  engine: unknown;
  /** The task's facts in commit order, without the Temporal engine's own decisions (a step's
   * progress reports as one). */
  facts: string[];
  versionsIncrease: boolean;
  /** The callbacks the demo app took in, by their sequence (progress in a row as one). */
  callbacks: string[];
  /** Their sequences are 1, 2, 3… with none missing. */
  sequencesInOrder: boolean;
  result: Map<string, Buffer | null>;
}

/** The worker reports progress at most so often: how many reports a step makes is a matter of timing. */
const oneProgressInARow = (item: string, i: number, all: string[]) =>
  !/progress/i.test(item) || item !== all[i - 1];

async function journey(world: DemoWorld): Promise<Journey> {
  const alice = visitor(world, 'alice');
  const upload = await alice.upload('holiday-photos.zip', world.samples.photos);
  expect(upload.status).toBe(201);
  const created = await alice.order(randomUUID(), {
    name: 'Holiday photos',
    sourceAssetId: upload.body.id,
    processingMode: 'ARCHIVE_CLEAN_THEN_WATERMARK',
    watermarkText: '机密 Confidential',
  });
  expect(created.status).toBe(201);
  let order: any;
  await expect
    .poll(
      async () => {
        order = (await alice.call('GET', `/api/orders/${created.body.id}`)).body;
        return order.businessStatus;
      },
      { timeout: 60_000, interval: 100 },
    )
    .toMatch(/^(SUCCEEDED|FAILED|CANCELLED)$/);
  expect(order).toMatchObject({ businessStatus: 'SUCCEEDED', progress: 100, failure: null });
  const sql = postgres(world.h.databaseUrl, { max: 1, onnotice: () => {} });
  try {
    const events = await sql<
      { type: string; step_key: string | null; step_attempt: number | null; v: string }[]
    >`
      SELECT type, step_key, step_attempt, task_version::text AS v FROM task_event
      WHERE task_id = ${order.taskId} ORDER BY task_version`;
    // Callbacks are sent after their fact commits and may arrive in any order: compared by sequence.
    const callbacks = await sql<{ sequence: number; type: string }[]>`
      SELECT sequence, type FROM demo.callback_inbox WHERE order_id = ${order.id} ORDER BY sequence`;
    const download = await alice.call('GET', `/api/assets/${order.resultAssetId}/content`);
    expect(download.status).toBe(200);
    const path = join(world.directory, `${randomUUID()}.zip`);
    await writeFile(path, download.body);
    const task = await world.h.request('GET', `/v1/tasks/${order.taskId}`, {
      token: world.credentials.apiKey,
    });
    return {
      engine: task.body.execution.orchestration,
      facts: events
        .filter((e) => e.type !== 'ORCHESTRATION_DECIDED')
        .map((e) => `${e.type}${e.step_key ? ` ${e.step_key}#${e.step_attempt}` : ''}`)
        .filter(oneProgressInARow),
      versionsIncrease: events.every((e, i) => i === 0 || BigInt(e.v) > BigInt(events[i - 1]!.v)),
      sequencesInOrder: callbacks.every((c, i) => c.sequence === i + 1),
      callbacks: callbacks.map((c) => c.type).filter(oneProgressInARow),
      result: await readZip(path),
    };
  } finally {
    await sql.end();
  }
}

describe.skipIf(!binary || !natsAnswers)('the demo journey on Temporal', () => {
  it('"clean then watermark" ends SUCCEEDED with the facts, callbacks and result of a native run', async () => {
    const viaTemporal = await journey(onTemporalWorld);
    const viaNative = await journey(native);
    expect(viaTemporal.engine).toMatchObject({ engine: 'temporal' });
    expect(viaNative.engine).toEqual({ engine: 'native', workflowId: null });
    expect(viaTemporal.facts).toEqual(viaNative.facts);
    expect(viaTemporal.facts).toContain('STEP_COMPLETED watermark#1');
    expect(viaTemporal.versionsIncrease && viaNative.versionsIncrease).toBe(true);
    expect(viaTemporal.callbacks).toEqual(viaNative.callbacks);
    expect(viaTemporal.callbacks.at(-1)).toBe('execution.succeeded');
    expect(viaTemporal.sequencesInOrder && viaNative.sequencesInOrder).toBe(true);
    // The same file: the junk removed and the same watermark drawn into the same images.
    expect([...viaTemporal.result.keys()].sort()).toEqual([...viaNative.result.keys()].sort());
    // (A folder entry has no bytes.)
    for (const [name, bytes] of viaNative.result)
      expect(viaTemporal.result.get(name)?.toString('base64') ?? null, `${name} is the same in both`).toBe(
        bytes?.toString('base64') ?? null,
      );
  }, 180_000);
});

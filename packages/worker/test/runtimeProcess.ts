/**
 * The real worker runtime as its own process, with two test capabilities and the built-in ones, so that a test can SIGKILL or
 * SIGTERM it. Prints `{ "workerId": … }` once its session is open.
 *
 *   node --conditions=@tdp/source --import tsx packages/worker/test/runtimeProcess.ts <baseUrl> <workerKey> <dbPath> <nodeId>
 */
import { builtinCapabilities } from '@tdp/capabilities';
import { newId } from '@tdp/protocol';
import { Type } from 'typebox';
import { CapabilityError, defineCapability, LocalStore, WorkerClient, WorkerRuntime } from '../src/index.ts';

const [baseUrl, workerKey, dbPath, nodeId] = process.argv.slice(2) as [string, string, string, string];

const echo = defineCapability({
  name: 'test.echo',
  version: '1',
  input: Type.Object({ text: Type.String(), delayMs: Type.Optional(Type.Integer({ minimum: 0 })) }),
  output: Type.Object({ echo: Type.String() }),
  async run(ctx, input) {
    ctx.progress(10, { phase: 'working' });
    await new Promise((resolve) => setTimeout(resolve, input.delayMs ?? 0));
    ctx.progress(90);
    if (input.text === 'refuse') throw new CapabilityError('TEXT_REFUSED', 'this text is refused');
    return { echo: input.text };
  },
});

/** Runs until cancelled or handed back. */
const wait = defineCapability({
  name: 'test.wait',
  version: '1',
  input: Type.Object({}),
  output: Type.Object({}),
  async run(ctx) {
    await new Promise((_resolve, reject) => {
      ctx.signal.addEventListener('abort', () => reject(new Error('aborted')), { once: true });
    });
    return {};
  },
});

/** Saves a checkpoint, then waits; after a restart it finishes at once with what it had saved. */
const resume = defineCapability({
  name: 'test.resume',
  version: '1',
  resumable: true,
  input: Type.Object({}),
  output: Type.Object({ resumedFrom: Type.Union([Type.Integer(), Type.Null()]) }),
  async run(ctx) {
    const saved = ctx.checkpoint as { step: number } | null;
    if (saved) return { resumedFrom: saved.step };
    ctx.saveCheckpoint({ step: 7 });
    await new Promise((_resolve, reject) => {
      ctx.signal.addEventListener('abort', () => reject(new Error('aborted')), { once: true });
    });
    return { resumedFrom: null };
  },
});

const store = new LocalStore(dbPath, newId);
const runtime = new WorkerRuntime({
  client: new WorkerClient(baseUrl, workerKey, 2_000),
  store,
  capabilities: [echo, wait, resume, ...builtinCapabilities],
  nodeId,
  maxConcurrency: 4,
  drainGraceMs: 1_000,
  progressIntervalMs: 50,
  // The test storage listens on 127.0.0.1, which the egress policy refuses unless allowed.
  egressAllow: ['127.0.0.0/8'],
});
process.once('SIGTERM', () => {
  runtime.drain().then(
    () => {
      store.close();
      process.exit(0);
    },
    () => process.exit(1),
  );
});
await runtime.start();
process.stdout.write(`${JSON.stringify({ workerId: runtime.id })}\n`);

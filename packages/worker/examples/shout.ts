/**
 * A custom capability, run by the TDP worker runtime: `text.shout@1` upper-cases a text, reporting
 * progress on the way. Run it next to `npm start`:
 *
 *   TDP_WORKER_KEY=tdpw_… node --conditions=@tdp/source --import tsx packages/worker/examples/shout.ts
 *
 * (`npm start` prints an admin token; `POST /admin/v1/worker-credentials` with it issues a worker key.)
 * Then publish a workflow with a step `{ key: 'shout', capability: 'text.shout', capabilityVersion: '1',
 * inputMapping: { text: '$.input.text' } }` and submit a task with `input: { text: 'hello' }`.
 */

import { CapabilityError, defineCapability, startWorker } from '@tdp/worker';
import { Type } from 'typebox';

const shout = defineCapability({
  name: 'text.shout',
  version: '1',
  input: Type.Object({ text: Type.String({ maxLength: 10_000 }) }),
  output: Type.Object({ shouted: Type.String() }),
  async run(ctx, input) {
    if (input.text.trim() === '')
      throw new CapabilityError('TEXT_EMPTY', 'nothing to shout', { retryable: false });
    ctx.progress(50, { phase: 'shouting' });
    // Long work checks ctx.signal: it is aborted when the task is cancelled or the worker drains.
    ctx.signal.throwIfAborted();
    ctx.log.info('shouted', { length: input.text.length });
    return { shouted: input.text.toUpperCase() };
  },
});

// SIGTERM or Ctrl-C drains: running attempts finish (or are handed back), then the process exits.
await startWorker({
  url: process.env.TDP_URL ?? 'http://127.0.0.1:8080',
  key: process.env.TDP_WORKER_KEY ?? '',
  capabilities: [shout],
  database: process.env.TDP_WORKER_DB ?? '.tdp/shout-worker.db',
});

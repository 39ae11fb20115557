/**
 * The TDP worker runtime running `text.shout@1` (shout.ts). Run it next to `npm start`:
 *
 *   TDP_WORKER_KEY=tdpw_… node --conditions=@tdp/source --import tsx packages/worker/examples/shoutWorker.ts
 *
 * (`npm start` prints an admin token; `POST /admin/v1/worker-credentials` with it issues a worker key.)
 * Then publish a workflow with a step `{ key: 'shout', capability: 'text.shout', capabilityVersion: '1',
 * inputMapping: { text: '$.input.text' } }` and submit a task with `input: { text: 'hello' }`.
 */

import { startWorker } from '@tdp/worker';

// SIGTERM or Ctrl-C drains: running attempts finish (or are handed back), then the process exits. Each
// attempt runs in a capability runner that imports shout.ts, so no step can take the worker down.
await startWorker({
  url: process.env.TDP_URL ?? 'http://127.0.0.1:8080',
  key: process.env.TDP_WORKER_KEY ?? '',
  capabilityModule: new URL('./shout.ts', import.meta.url),
  database: process.env.TDP_WORKER_DB ?? '.tdp/shout-worker.db',
});

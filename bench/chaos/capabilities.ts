/**
 * The chaos suite's one TDP capability, in a module of its own so that the worker's capability runners
 * can import it: every job sleeps `CHAOS_SLEEP_MS`, then prints one JSON line `{ done, job, at }` on
 * stdout (the worker's, which the runners share), so the suite sees every execution.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { Type } from 'typebox';
import { defineCapability } from '../../packages/worker/src/sdk.ts';

const sleepMs = Number(process.env.CHAOS_SLEEP_MS ?? 50);

export const chaosSleep = defineCapability({
  name: 'chaos.sleep',
  version: '1',
  input: Type.Object({ key: Type.String(), sentAt: Type.Number() }),
  output: Type.Object({}),
  run: async (ctx, input) => {
    await sleep(sleepMs);
    process.stdout.write(
      `${JSON.stringify({ done: input.key, job: ctx.taskId, at: Date.now(), worker: process.env.TDP_WORKER_NAME })}\n`,
    );
    return {};
  },
});

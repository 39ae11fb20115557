/**
 * A custom capability: `text.shout@1` upper-cases a text, reporting progress on the way. It lives in a
 * module of its own, because the worker runs each attempt in a capability runner process that imports
 * this module (shoutWorker.ts starts the worker).
 */

import { CapabilityError, defineCapability } from '@tdp/worker';
import { Type } from 'typebox';

export const shout = defineCapability({
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

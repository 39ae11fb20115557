/** The capability module of `bench -- isolation`: a step that does nothing but answer. */
import { Type } from 'typebox';
import { defineCapability } from '../packages/worker/src/sdk.ts';

export const noop = defineCapability({
  name: 'bench.noop',
  version: '1',
  input: Type.Object({ n: Type.Integer() }),
  output: Type.Object({ n: Type.Integer() }),
  run: async (_ctx, input) => ({ n: input.n }),
});

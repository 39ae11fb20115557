/**
 * Type-level tests of defineCapability(): `tsc -b` compiles this file, so each `@ts-expect-error` fails
 * the build if the line it marks stops being a type error. Nothing runs it. `run`'s types follow from the
 * schemas alone (never inferred back from `run`, which was slow: packages/sdk/test/fastTypes.test.ts).
 */
import { Type } from 'typebox';
import { type Capability, defineCapability } from '../src/index.ts';

type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;

const render = defineCapability({
  name: 'invoice.render',
  version: '1',
  input: Type.Object({
    customer: Type.Object({ name: Type.String(), email: Type.Optional(Type.String()) }),
    lines: Type.Array(Type.Object({ sku: Type.String(), quantity: Type.Integer() })),
    currency: Type.Optional(Type.Union([Type.Literal('EUR'), Type.Literal('USD')])),
  }),
  output: Type.Object({
    document: Type.String(),
    pages: Type.Integer(),
    notes: Type.Optional(Type.String()),
  }),
  run: async (_ctx, input) => ({ document: input.customer.name, pages: input.lines.length }),
});

export const inferred: [true, true] = [
  true as Same<
    Parameters<typeof render.run>[1],
    {
      customer: { name: string; email?: string };
      lines: { sku: string; quantity: number }[];
      currency?: 'EUR' | 'USD';
    }
  >,
  true as Same<Awaited<ReturnType<typeof render.run>>, { document: string; pages: number; notes?: string }>,
];

// A defined capability is a Capability, e.g. for a worker's list of them.
export const capabilities: Capability[] = [render];

const input = Type.Object({ text: Type.String() });
const output = Type.Object({ length: Type.Number() });

defineCapability({
  name: 'text.length',
  version: '1',
  input,
  output,
  // @ts-expect-error the result's field has the wrong type
  run: async (_ctx, { text }) => ({ length: text }),
});

defineCapability({
  name: 'text.length',
  version: '1',
  input,
  output,
  // @ts-expect-error the result lacks a required field
  run: async () => ({}),
});

defineCapability({
  name: 'text.length',
  version: '1',
  input,
  output,
  // @ts-expect-error the input has no field `size`
  run: async (_ctx, data) => ({ length: data.size }),
});

defineCapability({
  name: 'text.length',
  version: '1',
  input,
  output,
  // @ts-expect-error `run` must return a promise
  run: (_ctx, { text }) => ({ length: text.length }),
});

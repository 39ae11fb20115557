import { Type } from 'typebox';

export const ProblemSchema = Type.Object(
  {
    type: Type.String(),
    title: Type.String(),
    status: Type.Integer(),
    code: Type.String(),
    detail: Type.String(),
    retryable: Type.Boolean(),
    errors: Type.Optional(Type.Array(Type.Object({ path: Type.String(), message: Type.String() }))),
    instance: Type.Optional(Type.String()),
  },
  { $id: 'Problem', description: 'RFC 9457 problem details; branch on `code`.' },
);

export const problemResponses = {
  '4xx': Type.Ref('Problem'),
  '5xx': Type.Ref('Problem'),
};

export const IdempotencyKeyHeader = Type.Object({
  'idempotency-key': Type.Optional(
    Type.String({
      minLength: 1,
      maxLength: 255,
      description: 'Required. The same key replays the original answer.',
    }),
  ),
});

export const Uuid = Type.String({ format: 'uuid' });

/** For endpoints whose body is optional: a missing body is validated (and handled) as `{}`. */
export async function emptyBodyAsObject(request: { body: unknown }): Promise<void> {
  if (request.body === undefined || request.body === null) request.body = {};
}

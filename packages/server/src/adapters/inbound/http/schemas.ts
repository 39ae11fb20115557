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

/** Errors are documented as what they are on the wire: `application/problem+json`, not `application/json`. */
const problemContent = { content: { 'application/problem+json': { schema: Type.Ref('Problem') } } };

export const problemResponses = { '4xx': problemContent, '5xx': problemContent };

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

/** A server-sent event stream (the route writes it itself). */
export const eventStream = {
  description: 'Server-sent events (each `data` is one JSON message)',
  content: {
    'text/event-stream': {
      schema: Type.Object(
        { data: Type.String(), event: Type.Optional(Type.String()), id: Type.Optional(Type.String()) },
        { additionalProperties: true },
      ),
    },
  },
};

/** For endpoints whose body is optional: a missing body is validated (and handled) as `{}`. */
export async function emptyBodyAsObject(request: { body: unknown }): Promise<void> {
  if (request.body === undefined || request.body === null) request.body = {};
}

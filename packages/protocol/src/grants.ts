import { type Static, Type } from 'typebox';

/**
 * An access grant as TDP returns it to a worker (docs/resource-provider.md): where and how to send the
 * bytes, until when, and the resource it is for (for an artifact, the new resource's reference).
 */
export const AccessGrant = Type.Object({
  grantId: Type.String(),
  purpose: Type.Union([Type.Literal('DOWNLOAD'), Type.Literal('UPLOAD'), Type.Literal('ARTIFACT')]),
  url: Type.String(),
  method: Type.Union([Type.Literal('GET'), Type.Literal('PUT')]),
  headers: Type.Record(Type.String(), Type.String()),
  expiresAt: Type.String(),
  maxBytes: Type.Union([Type.Integer(), Type.Null()]),
  resourceRef: Type.String(),
});
export type AccessGrant = Static<typeof AccessGrant>;

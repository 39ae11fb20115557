/**
 * The vocabulary of Centrifugo's JSON client protocol that the gateway speaks: reply errors, close codes,
 * command shapes and how a publication goes on the wire (docs/design/realtime-wire-compatibility.md).
 */
import type { JsonFaultCode } from '@tdp/protocol';
import type { Publication } from './engine.ts';

/** Reply errors the SDK knows, with Centrifugo's codes and messages. */
export const replyErrors = {
  internal: { code: 100, message: 'internal server error' },
  /** Centrifugo's internal error as a client command gets it: the SDK retries the command. */
  internalTemporary: { code: 100, message: 'internal server error', temporary: true },
  unknownChannel: { code: 102, message: 'unknown channel' },
  permissionDenied: { code: 103, message: 'permission denied' },
  methodNotFound: { code: 104, message: 'method not found' },
  alreadySubscribed: { code: 105, message: 'already subscribed' },
  limitExceeded: { code: 106, message: 'limit exceeded' },
  badRequest: { code: 107, message: 'bad request' },
  notAvailable: { code: 108, message: 'not available' },
  tokenExpired: { code: 109, message: 'token expired' },
  unrecoverablePosition: { code: 112, message: 'unrecoverable position' },
} as const;

export type ReplyError = { code: number; message: string; temporary?: boolean };

export type Close = readonly [number, string];
/** Close codes; terminal ones need a reason for the SDK to honour them. */
export const closes = {
  shutdown: [3001, 'shutdown'],
  internal: [3004, 'internal server error'],
  expired: [3005, 'connection expired'],
  slow: [3008, 'slow'],
  insufficientState: [3010, 'insufficient state'],
  noPong: [3012, 'no pong'],
  invalidToken: [3500, 'invalid token'],
  badRequest: [3501, 'bad request'],
  stale: [3502, 'stale'],
  forceDisconnect: [3503, 'force disconnect'],
  notAvailable: [3508, 'not available'],
  permissionDenied: [3507, 'permission denied'],
} as const satisfies Record<string, Close>;

/** A bad request for JSON past TDP's limits: the reason names the code (`JSON_TOO_DEEP`, …). */
export const jsonRefused = (code: JsonFaultCode): Close => [closes.badRequest[0], `bad request: ${code}`];

/** This gateway's version in `connect` replies and the server API's `info`. */
export const version = '0.1.0';

export type Command = { id?: number } & Record<string, unknown>;

/** The recovery part of a subscribe request (and of a connect request's `subs`). */
export interface RecoverRequest {
  recover?: boolean;
  offset?: number;
  epoch?: string;
}

/** A history read, from a client's `history` command or the server API's `history`. */
export interface HistoryRequest {
  channel?: string;
  limit?: number;
  since?: { offset?: number; epoch?: string };
  reverse?: boolean;
}

/** A publication as clients see it: offset 0 (not kept in history) goes without an offset. */
export const wire = (p: Publication) =>
  p.offset > 0 ? { data: p.data, offset: p.offset } : { data: p.data };

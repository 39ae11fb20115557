/**
 * A realtime gateway that speaks Centrifugo's JSON client protocol over WebSocket, so that the
 * `centrifuge` SDK connects to it unchanged (../shared/CENTRIFUGO_COMPAT.md). This first cut: connect
 * with an HS256 connection JWT (server-side subscriptions from its `channels` claim), subscribe with a
 * subscription JWT, unsubscribe, history, recovery by offset and epoch, token refresh, ping/pong, and
 * publications pushed as they are published — on the memory engine.
 */
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, Server } from 'node:http';
import type { Duplex } from 'node:stream';
import { type JWTPayload, errors as joseErrors, jwtVerify } from 'jose';
import { type WebSocket, WebSocketServer } from 'ws';
import { type HistoryOptions, MemoryEngine, type Publication, type StreamPosition } from './memoryEngine.ts';

export interface GatewayOptions {
  /** HMAC key of connection and subscription tokens (HS256/384/512). */
  hmacKey: Uint8Array | string;
  /** History per channel (default: 100 publications for 10 minutes). */
  history?: (channel: string) => HistoryOptions;
  pingIntervalMs?: number;
  now?: () => number;
  /** At most `max` subscriptions per connection to channels starting with `prefix` (error 106 past it). */
  channelLimits?: { prefix: string; max: number }[];
}

/** Reply errors the SDK knows (CENTRIFUGO_COMPAT.md §3). */
const replyErrors = {
  permissionDenied: { code: 103, message: 'permission denied' },
  methodNotFound: { code: 104, message: 'method not found' },
  alreadySubscribed: { code: 105, message: 'already subscribed' },
  limitExceeded: { code: 106, message: 'limit exceeded' },
  badRequest: { code: 107, message: 'bad request' },
  notAvailable: { code: 108, message: 'not available' },
  tokenExpired: { code: 109, message: 'token expired' },
  unrecoverablePosition: { code: 112, message: 'unrecoverable position' },
} as const;

/** Close codes; terminal ones need a reason for the SDK to honour them. */
const closes = {
  invalidToken: [3500, 'invalid token'],
  badRequest: [3501, 'bad request'],
  stale: [3502, 'stale'],
  notAvailable: [3508, 'not available'],
  shutdown: [3001, 'shutdown'],
} as const;

const historyLimitCap = 300;
const recoveryLimit = 300;

type Command = { id?: number } & Record<string, unknown>;

interface Session {
  socket: WebSocket;
  client: string;
  user: string | null;
  channels: Set<string>;
}

const wire = (p: Publication) => ({ data: p.data, offset: p.offset });

export class Gateway {
  readonly engine: MemoryEngine;
  private readonly sockets = new WebSocketServer({ noServer: true, maxPayload: 64 * 1024 });
  private readonly sessions = new Set<Session>();
  private readonly subscribers = new Map<string, Set<Session>>();
  private readonly secret: Uint8Array;
  private readonly pinger: NodeJS.Timeout;

  constructor(private readonly options: GatewayOptions) {
    this.secret =
      typeof options.hmacKey === 'string' ? new TextEncoder().encode(options.hmacKey) : options.hmacKey;
    this.engine = new MemoryEngine(options.history ?? (() => ({ size: 100, ttlMs: 600_000 })), options.now);
    this.pinger = setInterval(() => {
      for (const session of this.sessions) if (session.user !== null) this.write(session, [{}]);
    }, options.pingIntervalMs ?? 25_000);
    this.pinger.unref();
  }

  /** Serves the WebSocket endpoint on `server` at `path`. */
  attach(server: Server, path = '/connection/websocket'): void {
    server.on('upgrade', (request: IncomingMessage, socket: Duplex, head: Buffer) => {
      if (new URL(request.url ?? '/', 'http://x').pathname !== path) return;
      this.sockets.handleUpgrade(request, socket, head, (ws) => this.open(ws));
    });
  }

  /** Publishes to a channel: appended to its history and pushed to its subscribers. */
  publish(channel: string, data: unknown): StreamPosition {
    const { publication, epoch } = this.engine.publish(channel, data);
    const push = { push: { channel, pub: wire(publication) } };
    for (const session of this.subscribers.get(channel) ?? []) this.write(session, [push]);
    return { offset: publication.offset, epoch };
  }

  async close(): Promise<void> {
    clearInterval(this.pinger);
    for (const session of this.sessions) session.socket.close(...closes.shutdown);
    await new Promise<void>((resolve) => this.sockets.close(() => resolve()));
  }

  private open(socket: WebSocket): void {
    const session: Session = { socket, client: randomUUID(), user: null, channels: new Set() };
    this.sessions.add(session);
    // No connect within 10 s: stale.
    const stale = setTimeout(() => session.user === null && socket.close(...closes.stale), 10_000);
    let queue = Promise.resolve();
    socket.on('message', (raw) => {
      // Commands of one connection are handled in order (a subscribe waits for its connect).
      queue = queue
        .then(() => this.onFrame(session, raw.toString()))
        .catch(() => socket.close(...closes.badRequest));
    });
    socket.on('close', () => {
      clearTimeout(stale);
      this.sessions.delete(session);
      for (const channel of session.channels) this.subscribers.get(channel)?.delete(session);
    });
  }

  private write(session: Session, messages: unknown[]): void {
    if (session.socket.readyState === session.socket.OPEN)
      session.socket.send(messages.map((m) => JSON.stringify(m)).join('\n'));
  }

  private async onFrame(session: Session, frame: string): Promise<void> {
    const replies: unknown[] = [];
    for (const line of frame.split('\n')) {
      if (line.trim() === '') continue;
      const command = JSON.parse(line) as Command;
      if (Object.keys(command).length === 0) continue; // a pong
      const reply = await this.handle(session, command);
      if (reply === 'closed') return;
      if (reply) replies.push(reply);
    }
    if (replies.length > 0) this.write(session, replies);
  }

  private async handle(session: Session, command: Command): Promise<unknown | null | 'closed'> {
    const id = command.id;
    const answer = (key: string, result: Record<string, unknown>) => ({ id, [key]: result });
    const fail = (error: { code: number; message: string }) => ({ id, error });
    const close = ([code, reason]: readonly [number, string]) => {
      session.socket.close(code, reason);
      return 'closed' as const;
    };
    if (session.user === null && !('connect' in command)) return close(closes.badRequest);

    if ('connect' in command) {
      const request = (command.connect ?? {}) as { token?: string; subs?: Record<string, RecoverRequest> };
      const claims = await this.verify(request.token);
      if (claims === 'expired') return fail(replyErrors.tokenExpired);
      if (!claims || claims.channel !== undefined) return close(closes.invalidToken);
      session.user = typeof claims.sub === 'string' ? claims.sub : '';
      const subs: Record<string, unknown> = {};
      for (const channel of Array.isArray(claims.channels) ? (claims.channels as string[]) : [])
        subs[channel] = this.join(session, channel, request.subs?.[channel] ?? {});
      return answer('connect', {
        client: session.client,
        version: '0.1.0',
        ping: Math.round((this.options.pingIntervalMs ?? 25_000) / 1000),
        pong: true,
        ...expiry(claims, this.now()),
        ...(Object.keys(subs).length > 0 ? { subs } : {}),
      });
    }
    if ('subscribe' in command) {
      const request = command.subscribe as { channel?: string; token?: string } & RecoverRequest;
      if (!request?.channel) return fail(replyErrors.badRequest);
      if (!request.token) return fail(replyErrors.permissionDenied);
      const claims = await this.verify(request.token);
      if (claims === 'expired') return fail(replyErrors.tokenExpired);
      if (!claims) return fail(replyErrors.permissionDenied);
      if (claims.sub !== session.user || claims.channel !== request.channel)
        return close(closes.invalidToken);
      if (session.channels.has(request.channel)) return fail(replyErrors.alreadySubscribed);
      const limit = this.options.channelLimits?.find((l) => request.channel!.startsWith(l.prefix));
      if (limit && [...session.channels].filter((c) => c.startsWith(limit.prefix)).length >= limit.max)
        return fail(replyErrors.limitExceeded);
      return answer('subscribe', {
        ...this.join(session, request.channel, request),
        ...expiry(claims, this.now()),
      });
    }
    if ('unsubscribe' in command) {
      const channel = (command.unsubscribe as { channel?: string })?.channel ?? '';
      session.channels.delete(channel);
      this.subscribers.get(channel)?.delete(session);
      return answer('unsubscribe', {});
    }
    if ('history' in command) {
      const request = command.history as {
        channel?: string;
        limit?: number;
        since?: { offset?: number; epoch?: string };
        reverse?: boolean;
      };
      if (!request?.channel || !session.channels.has(request.channel))
        return fail(replyErrors.permissionDenied);
      if (request.reverse && request.since && !request.since.offset) return fail(replyErrors.badRequest);
      const limit =
        request.limit === undefined || request.limit === 0
          ? 0
          : request.limit < 0
            ? historyLimitCap
            : Math.min(request.limit, historyLimitCap);
      const result = this.engine.read(request.channel, {
        limit,
        ...(request.since ? { since: request.since } : {}),
        ...(request.reverse ? { reverse: true } : {}),
      });
      if (!result.ok) return fail(replyErrors.unrecoverablePosition);
      return answer('history', {
        ...(result.publications.length > 0 ? { publications: result.publications.map(wire) } : {}),
        epoch: result.position.epoch,
        offset: result.position.offset,
      });
    }
    if ('refresh' in command) {
      const claims = await this.verify((command.refresh as { token?: string })?.token);
      if (claims === 'expired') return close([3005, 'connection expired']);
      if (!claims || claims.sub !== session.user) return close(closes.invalidToken);
      return answer('refresh', expiry(claims, this.now()));
    }
    if ('sub_refresh' in command) {
      const request = command.sub_refresh as { channel?: string; token?: string };
      const claims = await this.verify(request?.token);
      if (claims === 'expired') return fail(replyErrors.tokenExpired);
      if (!claims || claims.sub !== session.user || claims.channel !== request.channel)
        return close(closes.invalidToken);
      return answer('sub_refresh', expiry(claims, this.now()));
    }
    if ('send' in command) return close(closes.notAvailable);
    if ('publish' in command) return fail(replyErrors.permissionDenied);
    if ('presence' in command || 'presence_stats' in command) return fail(replyErrors.notAvailable);
    return fail(replyErrors.methodNotFound);
  }

  /** Subscribes the session; with `recover`, the publications it missed since its position. */
  private join(session: Session, channel: string, request: RecoverRequest): Record<string, unknown> {
    session.channels.add(channel);
    let set = this.subscribers.get(channel);
    if (!set) {
      set = new Set();
      this.subscribers.set(channel, set);
    }
    set.add(session);
    const top = this.engine.position(channel);
    if (!request.recover)
      return { recoverable: true, positioned: true, epoch: top.epoch, offset: top.offset };
    const since = request.offset ?? 0;
    const missed = this.engine.read(channel, {
      since: { offset: since, ...(request.epoch ? { epoch: request.epoch } : {}) },
      limit: recoveryLimit,
    });
    const recovered =
      missed.ok &&
      (missed.publications.length === 0
        ? top.offset === since
        : missed.publications[0]!.offset === since + 1 && missed.publications.at(-1)!.offset === top.offset);
    return recovered && missed.ok
      ? {
          recoverable: true,
          positioned: true,
          epoch: top.epoch,
          offset: since,
          recovered: true,
          was_recovering: true,
          ...(missed.publications.length > 0 ? { publications: missed.publications.map(wire) } : {}),
        }
      : { recoverable: true, positioned: true, epoch: top.epoch, offset: top.offset, was_recovering: true };
  }

  private now(): number {
    return (this.options.now ?? Date.now)();
  }

  /** The token's claims; 'expired' for an expired one; null for anything else wrong with it. */
  private async verify(
    token: string | undefined,
  ): Promise<(JWTPayload & Record<string, unknown>) | 'expired' | null> {
    if (!token) return null;
    try {
      const { payload } = await jwtVerify(token, this.secret, {
        algorithms: ['HS256', 'HS384', 'HS512'],
        currentDate: new Date(this.now()),
      });
      return payload;
    } catch (error) {
      return error instanceof joseErrors.JWTExpired ? 'expired' : null;
    }
  }
}

interface RecoverRequest {
  recover?: boolean;
  offset?: number;
  epoch?: string;
}

function expiry(claims: JWTPayload, now: number): Record<string, unknown> {
  if (!claims.exp) return {};
  return { expires: true, ttl: Math.max(1, claims.exp - Math.floor(now / 1000)) };
}

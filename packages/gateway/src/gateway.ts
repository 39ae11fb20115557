/**
 * A realtime gateway that speaks Centrifugo's JSON client protocol, so that the `centrifuge` SDK
 * connects to it unchanged (../shared/CENTRIFUGO_COMPAT.md): WebSocket and unidirectional SSE clients,
 * connection and subscription JWTs (HMAC, or RS256/ES256 from a JWKS URL), server-side subscriptions,
 * publications with offsets and epochs, history and recovery, token refresh and expiry, ping/pong, and
 * Centrifugo's HTTP server API. Channels live in an engine: memory for one node, Redis for several.
 */
import { randomUUID, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import {
  createRemoteJWKSet,
  type JWTPayload,
  type JWTVerifyGetKey,
  errors as joseErrors,
  jwtVerify,
} from 'jose';
import { type WebSocket, WebSocketServer } from 'ws';
import type { ControlMessage, Engine, HistoryOptions, Publication, StreamPosition } from './engine.ts';
import { MemoryEngine } from './memoryEngine.ts';

export interface GatewayOptions {
  /** HMAC key of connection and subscription tokens (HS256/384/512). */
  hmacKey: Uint8Array | string;
  /** A JWKS URL: tokens signed with RS256/ES256 (and the other RSA/EC/EdDSA algorithms) by its keys. */
  jwksUrl?: string;
  /** The key of the HTTP server API (`/api/<method>`); without one the API answers 404. */
  apiKey?: string;
  /** History per channel (default: 100 publications for 10 minutes). */
  history?: (channel: string) => HistoryOptions;
  /** Where channels live (default: this process's memory). */
  engine?: Engine;
  pingIntervalMs?: number;
  /** A client told to answer pings that stays silent this long after one is closed with 3012. */
  pongTimeoutMs?: number;
  /** How long after its token expired an unrefreshed connection is closed with 3005. */
  expiredCloseDelayMs?: number;
  now?: () => number;
  /** At most `max` subscriptions per connection to channels starting with `prefix` (error 106 past it). */
  channelLimits?: { prefix: string; max: number }[];
  /** This node's name in `info`. */
  name?: string;
}

/** Reply errors the SDK knows (CENTRIFUGO_COMPAT.md §3). */
const replyErrors = {
  internal: { code: 100, message: 'internal server error' },
  permissionDenied: { code: 103, message: 'permission denied' },
  methodNotFound: { code: 104, message: 'method not found' },
  alreadySubscribed: { code: 105, message: 'already subscribed' },
  limitExceeded: { code: 106, message: 'limit exceeded' },
  badRequest: { code: 107, message: 'bad request' },
  notAvailable: { code: 108, message: 'not available' },
  tokenExpired: { code: 109, message: 'token expired' },
  unrecoverablePosition: { code: 112, message: 'unrecoverable position' },
} as const;

type Close = readonly [number, string];
/** Close codes; terminal ones need a reason for the SDK to honour them. */
const closes = {
  shutdown: [3001, 'shutdown'],
  internal: [3004, 'internal server error'],
  expired: [3005, 'connection expired'],
  insufficientState: [3010, 'insufficient state'],
  noPong: [3012, 'no pong'],
  invalidToken: [3500, 'invalid token'],
  badRequest: [3501, 'bad request'],
  stale: [3502, 'stale'],
  forceDisconnect: [3503, 'force disconnect'],
  notAvailable: [3508, 'not available'],
  permissionDenied: [3507, 'permission denied'],
} as const satisfies Record<string, Close>;

const historyLimitCap = 300;
const recoveryLimit = 300;
const version = '0.1.0';

type Command = { id?: number } & Record<string, unknown>;
type Claims = JWTPayload & Record<string, unknown>;

interface Subscription {
  /** From the connection token (a gap closes the connection) or subscribed by the client. */
  serverSide: boolean;
  /** While joining: publications that arrived before the subscribe reply went out. */
  buffer: { publication: Publication; epoch: string }[] | null;
}

/** How a session's messages reach its client. */
interface Transport {
  /** Replies and pushes, in the bidirectional form (`{id, ...}` and `{push: ...}`). */
  send(messages: unknown[]): void;
  close(close: Close): void;
  /** Whether the client answers pings (bidirectional transports do). */
  pongs: boolean;
}

interface Session {
  transport: Transport;
  client: string;
  user: string | null;
  subscriptions: Map<string, Subscription>;
  expiryTimer: NodeJS.Timeout | null;
  pingSentAt: number | null;
  closed: boolean;
}

const wire = (p: Publication) => (p.offset > 0 ? { data: p.data, offset: p.offset } : { data: p.data });

interface RecoverRequest {
  recover?: boolean;
  offset?: number;
  epoch?: string;
}

/** See `Gateway.openInternal`. */
export interface InternalClient {
  /** Subscribes; with `since`, first the publications after it. False when those could not be recovered. */
  subscribe(channel: string, since?: StreamPosition): Promise<boolean>;
  unsubscribe(channel: string): void;
  /** The position of the last publication handed out on the channel. */
  position(channel: string): StreamPosition | null;
  close(): void;
}

export class Gateway {
  readonly engine: Engine;
  /** Resolves once the engine is running (publications before it wait for it). */
  readonly ready: Promise<void>;
  private readonly sockets = new WebSocketServer({ noServer: true, maxPayload: 64 * 1024 });
  /** The connections of this node, by client id. */
  private readonly sessions = new Map<string, Session>();
  private readonly subscribers = new Map<string, Set<Session>>();
  /** Channels this node watches in the engine, and the last position seen on each (for gaps). */
  private readonly watching = new Map<string, Promise<void>>();
  private readonly lastSeen = new Map<string, StreamPosition>();
  private readonly secret: Uint8Array;
  private readonly jwks: JWTVerifyGetKey | null;
  private readonly pinger: NodeJS.Timeout;
  private readonly pongChecker: NodeJS.Timeout;
  private readonly startedAt = Date.now();
  private readonly idempotent = new Map<string, { at: number; result: StreamPosition }>();

  constructor(private readonly options: GatewayOptions) {
    this.secret =
      typeof options.hmacKey === 'string' ? new TextEncoder().encode(options.hmacKey) : options.hmacKey;
    this.jwks = options.jwksUrl ? createRemoteJWKSet(new URL(options.jwksUrl)) : null;
    this.engine =
      options.engine ??
      new MemoryEngine(options.history ?? (() => ({ size: 100, ttlMs: 600_000 })), options.now);
    this.ready = this.engine.start({
      publication: (channel, publication, epoch) => this.deliver(channel, publication, epoch),
      control: (message) => this.onControl(message),
    });
    this.ready.catch(() => {});
    this.pinger = setInterval(() => this.ping(), options.pingIntervalMs ?? 25_000);
    this.pinger.unref();
    const pongTimeout = options.pongTimeoutMs ?? 8_000;
    this.pongChecker = setInterval(
      () => {
        const now = Date.now();
        for (const session of this.sessions.values())
          if (session.pingSentAt !== null && now - session.pingSentAt > pongTimeout)
            this.closeSession(session, closes.noPong);
      },
      Math.min(1_000, pongTimeout),
    );
    this.pongChecker.unref();
  }

  /** Serves the WebSocket endpoint on `server` at `path`. */
  attach(server: Server, path = '/connection/websocket'): void {
    server.on('upgrade', (request: IncomingMessage, socket: Duplex, head: Buffer) => {
      if (new URL(request.url ?? '/', 'http://x').pathname !== path) return;
      this.sockets.handleUpgrade(request, socket, head, (ws) => this.openWebSocket(ws));
    });
  }

  /**
   * Serves `/connection/uni_sse` and the server API `/api/<method>`; false for any other path (the
   * caller answers it).
   */
  handleHttp(request: IncomingMessage, response: ServerResponse): boolean {
    const path = new URL(request.url ?? '/', 'http://x').pathname;
    if (path === '/connection/uni_sse') {
      void this.openUniSse(request, response).catch(() => response.destroy());
      return true;
    }
    if (path.startsWith('/api/') || path === '/api') {
      void this.serveApi(request, response, path.slice('/api/'.length)).catch(() => {
        if (!response.headersSent) response.writeHead(500).end();
      });
      return true;
    }
    return false;
  }

  /** Publishes to a channel: appended to its history and pushed to its subscribers on every node. */
  async publish(
    channel: string,
    data: unknown,
    options: { skipHistory?: boolean; idempotencyKey?: string } = {},
  ): Promise<StreamPosition> {
    await this.ready;
    if (options.idempotencyKey) {
      const key = `${channel}\n${options.idempotencyKey}`;
      const known = this.idempotent.get(key);
      if (known && Date.now() - known.at < 5 * 60_000) return known.result;
      const result = await this.engine.publish(channel, data, options);
      if (this.idempotent.size > 100_000) this.idempotent.clear();
      this.idempotent.set(key, { at: Date.now(), result });
      return result;
    }
    return this.engine.publish(channel, data, options);
  }

  /**
   * A client inside this process (e.g. a server's SSE stream): it subscribes without tokens, so the
   * caller checks access. Publications reach `onPublication` in order per channel; when a channel's
   * missed publications cannot be recovered (after `since`, or after this node lost some), `onReset`.
   */
  openInternal(
    user: string,
    handlers: {
      onPublication(channel: string, publication: { data: unknown; offset: number }, epoch: string): void;
      onReset(channel: string): void;
    },
  ): InternalClient {
    const positions = new Map<string, StreamPosition>();
    let session: Session;
    const subscribe = async (channel: string, since?: StreamPosition): Promise<boolean> => {
      await this.ready;
      const result = await this.join(session, channel, since ? { recover: true, ...since } : {}, false);
      if (session.closed) return false;
      const reply = result.reply as {
        epoch: string;
        offset: number;
        recovered?: boolean;
        publications?: Publication[];
      };
      positions.set(channel, { offset: reply.offset, epoch: reply.epoch });
      for (const publication of reply.publications ?? []) {
        positions.set(channel, { offset: publication.offset, epoch: reply.epoch });
        handlers.onPublication(channel, publication, reply.epoch);
      }
      if (!reply.recovered) positions.set(channel, { offset: result.floor, epoch: reply.epoch });
      this.activate(session, channel, result.floor);
      return !since || reply.recovered === true;
    };
    session = this.newSession({
      pongs: false,
      send: (messages) => {
        type Push = {
          channel?: string;
          pub?: { data: unknown; offset: number };
          unsubscribe?: { code: number };
        };
        for (const message of messages as { push?: Push }[]) {
          const push = message.push;
          if (!push?.channel) continue;
          if (push.pub) {
            const known = positions.get(push.channel);
            if (push.pub.offset)
              positions.set(push.channel, { offset: push.pub.offset, epoch: known?.epoch ?? '' });
            handlers.onPublication(push.channel, push.pub, known?.epoch ?? '');
          } else if (push.unsubscribe?.code === 2500) {
            // Out of step: recover from where this client was, or tell the caller it cannot.
            const channel = push.channel;
            void subscribe(channel, positions.get(channel)).then((recovered) => {
              if (!recovered) handlers.onReset(channel);
            });
          }
        }
      },
      close: () => {},
    });
    session.user = user;
    return {
      subscribe,
      unsubscribe: (channel) => {
        positions.delete(channel);
        this.leave(session, channel);
      },
      position: (channel) => positions.get(channel) ?? null,
      close: () => this.ended(session),
    };
  }

  /**
   * How many channels starting with `prefix` a connection of this node follows; null when the
   * connection is not on this node (or gone).
   */
  subscriptionCount(client: string, prefix: string): number | null {
    const session = this.sessions.get(client);
    return session ? [...session.subscriptions.keys()].filter((c) => c.startsWith(prefix)).length : null;
  }

  /** Connections and channels on this node. */
  stats() {
    const users = new Set([...this.sessions.values()].map((s) => s.user).filter((u) => u !== null));
    let subs = 0;
    for (const session of this.sessions.values()) subs += session.subscriptions.size;
    return {
      num_clients: this.sessions.size,
      num_users: users.size,
      num_channels: this.subscribers.size,
      num_subs: subs,
    };
  }

  async close(): Promise<void> {
    clearInterval(this.pinger);
    clearInterval(this.pongChecker);
    for (const session of this.sessions.values()) this.closeSession(session, closes.shutdown);
    await new Promise<void>((resolve) => this.sockets.close(() => resolve()));
    await this.engine.close();
  }

  // ── sessions and transports ──────────────────────────────────────────────────────────────────────

  private newSession(transport: Transport): Session {
    const session: Session = {
      transport,
      client: randomUUID(),
      user: null,
      subscriptions: new Map(),
      expiryTimer: null,
      pingSentAt: null,
      closed: false,
    };
    this.sessions.set(session.client, session);
    return session;
  }

  private closeSession(session: Session, close: Close): void {
    if (session.closed) return;
    session.transport.close(close);
    this.ended(session);
  }

  /** The client is gone: forget its subscriptions and timers. */
  private ended(session: Session): void {
    if (session.closed) return;
    session.closed = true;
    if (session.expiryTimer) clearTimeout(session.expiryTimer);
    this.sessions.delete(session.client);
    for (const channel of session.subscriptions.keys()) this.leave(session, channel);
  }

  private openWebSocket(socket: WebSocket): void {
    const session = this.newSession({
      pongs: true,
      send: (messages) => {
        if (socket.readyState === socket.OPEN) socket.send(messages.map((m) => JSON.stringify(m)).join('\n'));
      },
      close: ([code, reason]) => socket.close(code, reason),
    });
    // No connect within 10 s: stale.
    const stale = setTimeout(() => session.user === null && this.closeSession(session, closes.stale), 10_000);
    let queue = Promise.resolve();
    socket.on('message', (raw) => {
      // Commands of one connection are handled in order (a subscribe waits for its connect).
      queue = queue
        .then(() => this.onFrame(session, raw.toString()))
        .catch(() => this.closeSession(session, closes.badRequest));
    });
    socket.on('close', () => {
      clearTimeout(stale);
      this.ended(session);
    });
  }

  /** A unidirectional SSE client: the connect request comes in the URL (or a POST body). */
  private async openUniSse(request: IncomingMessage, response: ServerResponse): Promise<void> {
    if (request.method !== 'GET' && request.method !== 'POST') {
      response.writeHead(405).end();
      return;
    }
    let connect: Record<string, unknown> = {};
    try {
      const text =
        request.method === 'POST'
          ? await readBody(request, 64 * 1024)
          : (new URL(request.url ?? '/', 'http://x').searchParams.get('cf_connect') ?? '');
      if (text === null) {
        response.writeHead(413).end();
        return;
      }
      if (text.trim() !== '') connect = JSON.parse(text) as Record<string, unknown>;
    } catch {
      response.writeHead(400).end();
      return;
    }
    response.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'private, no-cache, no-store, must-revalidate, max-age=0',
      'x-accel-buffering': 'no',
    });
    response.write('\r\n');
    const event = (message: unknown) => `data: ${JSON.stringify(message)}\n\n`;
    const session = this.newSession({
      pongs: false,
      // Pushes go bare; the connect reply goes as `{connect: ...}`; errors become a disconnect.
      send: (messages) => {
        let text = '';
        for (const m of messages as Record<string, unknown>[]) {
          if ('push' in m) text += event(m.push);
          else if ('connect' in m) text += event({ connect: m.connect });
          else if (Object.keys(m).length === 0) text += event({});
        }
        if (text !== '' && !response.writableEnded) response.write(text);
      },
      close: ([code, reason]) => {
        if (!response.writableEnded) response.end(event({ disconnect: { code, reason } }));
      },
    });
    response.on('close', () => this.ended(session));
    const reply = await this.handle(session, { id: 1, connect });
    if (reply === 'closed') return;
    const message = reply.message as { error?: { code: number } } | null;
    if (message?.error) {
      const code = message.error.code;
      this.closeSession(
        session,
        code === 109 || code === 110
          ? closes.expired
          : code === 103
            ? closes.permissionDenied
            : [3004, 'internal server error'],
      );
      return;
    }
    if (message) session.transport.send([message]);
    reply.after?.();
  }

  private ping(): void {
    const now = Date.now();
    for (const session of this.sessions.values()) {
      if (session.user === null) continue;
      session.transport.send([{}]);
      if (session.transport.pongs && session.pingSentAt === null) session.pingSentAt = now;
    }
  }

  private async onFrame(session: Session, frame: string): Promise<void> {
    const replies: unknown[] = [];
    const afters: (() => void)[] = [];
    for (const line of frame.split('\n')) {
      if (line.trim() === '') continue;
      const command = JSON.parse(line) as Command;
      if (Object.keys(command).length === 0) {
        session.pingSentAt = null; // a pong
        continue;
      }
      const reply = await this.handle(session, command);
      if (reply === 'closed') return;
      if (reply.message) replies.push(reply.message);
      if (reply.after) afters.push(reply.after);
    }
    if (replies.length > 0) session.transport.send(replies);
    for (const after of afters) after();
  }

  // ── commands ─────────────────────────────────────────────────────────────────────────────────────

  private async handle(
    session: Session,
    command: Command,
  ): Promise<{ message: unknown | null; after?: () => void } | 'closed'> {
    const id = command.id;
    const answer = (key: string, result: Record<string, unknown>, after?: () => void) => ({
      message: { id, [key]: result },
      ...(after ? { after } : {}),
    });
    const fail = (error: { code: number; message: string }) => ({ message: { id, error } });
    const close = (reason: Close) => {
      this.closeSession(session, reason);
      return 'closed' as const;
    };
    if (session.user === null && !('connect' in command)) return close(closes.badRequest);

    if ('connect' in command) {
      if (session.user !== null) return close(closes.badRequest);
      const request = (command.connect ?? {}) as { token?: string; subs?: Record<string, RecoverRequest> };
      const claims = await this.verify(request.token);
      if (claims === 'expired') return fail(replyErrors.tokenExpired);
      if (!claims || claims.channel !== undefined) return close(closes.invalidToken);
      session.user = typeof claims.sub === 'string' ? claims.sub : '';
      this.armExpiry(session, claims);
      await this.ready;
      const subs: Record<string, unknown> = {};
      const joined: [string, number][] = [];
      for (const channel of Array.isArray(claims.channels) ? (claims.channels as string[]) : []) {
        const result = await this.join(session, channel, request.subs?.[channel] ?? {}, true);
        subs[channel] = result.reply;
        joined.push([channel, result.floor]);
      }
      if (session.closed) return 'closed';
      return answer(
        'connect',
        {
          client: session.client,
          version,
          ping: Math.round((this.options.pingIntervalMs ?? 25_000) / 1000),
          ...(session.transport.pongs ? { pong: true } : {}),
          ...expiry(claims, this.now()),
          ...(Object.keys(subs).length > 0 ? { subs } : {}),
        },
        () => {
          for (const [channel, floor] of joined) this.activate(session, channel, floor);
        },
      );
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
      if (session.subscriptions.has(request.channel)) return fail(replyErrors.alreadySubscribed);
      const limit = this.options.channelLimits?.find((l) => request.channel!.startsWith(l.prefix));
      if (
        limit &&
        [...session.subscriptions.keys()].filter((c) => c.startsWith(limit.prefix)).length >= limit.max
      )
        return fail(replyErrors.limitExceeded);
      const channel = request.channel;
      const result = await this.join(session, channel, request, false);
      if (session.closed) return 'closed';
      return answer('subscribe', { ...result.reply, ...expiry(claims, this.now()) }, () =>
        this.activate(session, channel, result.floor),
      );
    }
    if ('unsubscribe' in command) {
      const channel = (command.unsubscribe as { channel?: string })?.channel ?? '';
      this.leave(session, channel);
      return answer('unsubscribe', {});
    }
    if ('history' in command) {
      const request = command.history as {
        channel?: string;
        limit?: number;
        since?: { offset?: number; epoch?: string };
        reverse?: boolean;
      };
      if (!request?.channel || !session.subscriptions.has(request.channel))
        return fail(replyErrors.permissionDenied);
      const read = await this.history(request, historyLimitCap);
      return 'error' in read ? fail(read.error) : answer('history', read.result);
    }
    if ('refresh' in command) {
      const token = (command.refresh as { token?: string })?.token;
      if (!token) return close(closes.badRequest);
      const claims = await this.verify(token);
      if (claims === 'expired') return close(closes.expired);
      if (!claims || claims.sub !== session.user) return close(closes.invalidToken);
      this.armExpiry(session, claims);
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

  /** Closes the connection with 3005 once its token has expired and was not refreshed in time. */
  private armExpiry(session: Session, claims: Claims): void {
    if (session.expiryTimer) clearTimeout(session.expiryTimer);
    session.expiryTimer = null;
    if (!claims.exp) return;
    const closeAt = claims.exp * 1000 + (this.options.expiredCloseDelayMs ?? 25_000);
    session.expiryTimer = setTimeout(
      () => this.closeSession(session, closes.expired),
      Math.max(0, closeAt - this.now()),
    );
    session.expiryTimer.unref();
  }

  private async history(
    request: {
      channel?: string;
      limit?: number;
      since?: { offset?: number; epoch?: string };
      reverse?: boolean;
    },
    cap: number,
  ): Promise<{ result: Record<string, unknown> } | { error: { code: number; message: string } }> {
    if (request.reverse && request.since && !request.since.offset) return { error: replyErrors.badRequest };
    const limit =
      request.limit === undefined || request.limit === 0
        ? 0
        : request.limit < 0
          ? cap
          : Math.min(request.limit, cap);
    const result = await this.engine.read(request.channel!, {
      limit,
      ...(request.since ? { since: request.since } : {}),
      ...(request.reverse ? { reverse: true } : {}),
    });
    if (!result.ok) return { error: replyErrors.unrecoverablePosition };
    return {
      result: {
        ...(result.publications.length > 0 ? { publications: result.publications.map(wire) } : {}),
        epoch: result.position.epoch,
        offset: result.position.offset,
      },
    };
  }

  // ── channels ─────────────────────────────────────────────────────────────────────────────────────

  /**
   * Subscribes the session (its publications are buffered until `activate`); with `recover`, the
   * publications it missed since its position. `floor` is the offset the client is at after the reply.
   */
  private async join(
    session: Session,
    channel: string,
    request: RecoverRequest,
    serverSide: boolean,
  ): Promise<{ reply: Record<string, unknown>; floor: number }> {
    session.subscriptions.set(channel, { serverSide, buffer: [] });
    let set = this.subscribers.get(channel);
    if (!set) {
      set = new Set();
      this.subscribers.set(channel, set);
    }
    set.add(session);
    let watching = this.watching.get(channel);
    if (!watching) {
      watching = this.engine.watch(channel);
      this.watching.set(channel, watching);
    }
    await watching;
    if (!request.recover) {
      const top = (await this.engine.read(channel, { limit: 0 })).position;
      return {
        reply: { recoverable: true, positioned: true, epoch: top.epoch, offset: top.offset },
        floor: top.offset,
      };
    }
    const since = request.offset ?? 0;
    const missed = await this.engine.read(channel, {
      since: { offset: since, ...(request.epoch ? { epoch: request.epoch } : {}) },
      limit: recoveryLimit,
    });
    const top = missed.position;
    const recovered =
      missed.ok &&
      (missed.publications.length === 0
        ? top.offset === since
        : missed.publications[0]!.offset === since + 1 && missed.publications.at(-1)!.offset === top.offset);
    if (recovered && missed.ok)
      return {
        reply: {
          recoverable: true,
          positioned: true,
          epoch: top.epoch,
          offset: since,
          recovered: true,
          was_recovering: true,
          ...(missed.publications.length > 0 ? { publications: missed.publications.map(wire) } : {}),
        },
        floor: top.offset,
      };
    return {
      reply: {
        recoverable: true,
        positioned: true,
        epoch: top.epoch,
        offset: top.offset,
        was_recovering: true,
      },
      floor: top.offset,
    };
  }

  /** The subscribe reply went out: publications buffered meanwhile that are newer follow it. */
  private activate(session: Session, channel: string, floor: number): void {
    const subscription = session.subscriptions.get(channel);
    if (!subscription?.buffer) return;
    const newer = subscription.buffer.filter(
      ({ publication }) => publication.offset > floor || !publication.offset,
    );
    subscription.buffer = null;
    if (newer.length > 0)
      session.transport.send(newer.map(({ publication }) => ({ push: { channel, pub: wire(publication) } })));
  }

  private leave(session: Session, channel: string): void {
    session.subscriptions.delete(channel);
    const set = this.subscribers.get(channel);
    if (!set) return;
    set.delete(session);
    if (set.size > 0) return;
    this.subscribers.delete(channel);
    this.watching.delete(channel);
    this.lastSeen.delete(channel);
    this.engine.unwatch(channel).catch(() => {});
  }

  /** A publication of a watched channel, from this node or another, to its local subscribers. */
  private deliver(channel: string, publication: Publication, epoch: string): void {
    const set = this.subscribers.get(channel);
    if (!set) return;
    if (publication.offset > 0) {
      const last = this.lastSeen.get(channel);
      if (last && last.epoch === epoch && publication.offset <= last.offset) return;
      this.lastSeen.set(channel, { offset: publication.offset, epoch });
      // A publication skipped ahead: this node missed some; its clients catch up from the history.
      if (last && (last.epoch !== epoch || publication.offset !== last.offset + 1)) {
        this.outOfStep(channel);
        return;
      }
    }
    const push = { push: { channel, pub: wire(publication) } };
    for (const session of set) {
      const subscription = session.subscriptions.get(channel);
      if (subscription?.buffer) subscription.buffer.push({ publication, epoch });
      else session.transport.send([push]);
    }
  }

  /** Clients of the channel resubscribe and recover (a server-side subscription reconnects). */
  outOfStep(channel: string): void {
    for (const session of [...(this.subscribers.get(channel) ?? [])]) {
      const subscription = session.subscriptions.get(channel);
      if (!subscription) continue;
      if (subscription.serverSide) {
        this.closeSession(session, closes.insufficientState);
        continue;
      }
      this.leave(session, channel);
      session.transport.send([
        { push: { channel, unsubscribe: { code: 2500, reason: 'insufficient state' } } },
      ]);
    }
  }

  /** Every watched channel is out of step (the engine lost publications, e.g. a dropped Redis link). */
  resync(): void {
    for (const channel of [...this.subscribers.keys()]) this.outOfStep(channel);
  }

  private sessionsOf(user: string, client?: string): Session[] {
    if (client) {
      const session = this.sessions.get(client);
      return session?.user === user ? [session] : [];
    }
    return [...this.sessions.values()].filter((s) => s.user === user);
  }

  private onControl(message: ControlMessage): void {
    if (message.kind === 'unsubscribe') {
      for (const session of this.sessionsOf(message.user, message.client)) {
        if (!session.subscriptions.has(message.channel)) continue;
        this.leave(session, message.channel);
        session.transport.send([
          { push: { channel: message.channel, unsubscribe: { code: 2000, reason: 'server unsubscribe' } } },
        ]);
      }
      return;
    }
    if (message.kind === 'disconnect') {
      for (const session of this.sessionsOf(message.user, message.client))
        this.closeSession(session, [message.code, message.reason]);
      return;
    }
    if (message.kind === 'subscribe') {
      for (const session of this.sessionsOf(message.user, message.client)) {
        if (session.subscriptions.has(message.channel)) continue;
        const channel = message.channel;
        void this.join(session, channel, {}, true).then(({ reply, floor }) => {
          if (session.closed) return;
          session.transport.send([{ push: { channel, subscribe: reply } }]);
          this.activate(session, channel, floor);
        });
      }
    }
  }

  // ── server API ───────────────────────────────────────────────────────────────────────────────────

  private async serveApi(request: IncomingMessage, response: ServerResponse, method: string): Promise<void> {
    const expected = this.options.apiKey;
    if (!expected) {
      response.writeHead(404).end();
      return;
    }
    const url = new URL(request.url ?? '/', 'http://x');
    const authorization = request.headers.authorization ?? '';
    const given =
      (request.headers['x-api-key'] as string | undefined) ??
      (authorization.toLowerCase().startsWith('apikey ') ? authorization.slice(7).trim() : undefined) ??
      url.searchParams.get('api_key') ??
      '';
    if (!sameSecret(given, expected)) {
      response.writeHead(401).end();
      return;
    }
    if (request.method !== 'POST') {
      response.writeHead(405).end();
      return;
    }
    const text = await readBody(request, 1024 * 1024);
    if (text === null) {
      response.writeHead(413).end();
      return;
    }
    let body: Record<string, unknown>;
    try {
      body = text.trim() === '' ? {} : (JSON.parse(text) as Record<string, unknown>);
      if (typeof body !== 'object' || body === null || Array.isArray(body)) throw new Error('not an object');
    } catch {
      response.writeHead(400).end();
      return;
    }
    const handler = this.api[method as keyof typeof this.api];
    if (!handler) {
      response.writeHead(404).end();
      return;
    }
    const outcome = await handler(body).catch(() => ({ error: replyErrors.internal }));
    response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(outcome));
  }

  /** Centrifugo's server API methods (CENTRIFUGO_COMPAT.md §6): `{result}` or `{error}`. */
  private readonly api: Record<string, (body: Record<string, unknown>) => Promise<Record<string, unknown>>> =
    {
      publish: async (body) => {
        if (typeof body.channel !== 'string' || body.channel === '' || body.data === undefined)
          return { error: replyErrors.badRequest };
        return { result: await this.publishFromApi(body.channel, body) };
      },
      broadcast: async (body) => {
        if (!Array.isArray(body.channels) || body.data === undefined)
          return { error: replyErrors.badRequest };
        const responses = [];
        for (const channel of body.channels as unknown[]) {
          if (typeof channel !== 'string' || channel === '')
            responses.push({ error: replyErrors.badRequest });
          else
            responses.push(
              await this.publishFromApi(channel, body).then(
                (result) => ({ result }),
                () => ({ error: replyErrors.internal }),
              ),
            );
        }
        return { result: { responses } };
      },
      subscribe: (body) => this.membershipFromApi('subscribe', body),
      unsubscribe: (body) => this.membershipFromApi('unsubscribe', body),
      disconnect: async (body) => {
        if (typeof body.user !== 'string') return { error: replyErrors.badRequest };
        const given = body.disconnect as { code?: number; reason?: string } | undefined;
        await this.engine.sendControl({
          kind: 'disconnect',
          user: body.user,
          code: given?.code ?? closes.forceDisconnect[0],
          reason: given?.reason ?? closes.forceDisconnect[1],
          ...(typeof body.client === 'string' ? { client: body.client } : {}),
        });
        return { result: {} };
      },
      history: async (body) => {
        if (typeof body.channel !== 'string' || body.channel === '') return { error: replyErrors.badRequest };
        return this.history(
          body as {
            channel: string;
            limit?: number;
            since?: { offset?: number; epoch?: string };
            reverse?: boolean;
          },
          Number.MAX_SAFE_INTEGER,
        );
      },
      /** Commands in order (or together with `parallel`), answered as `{replies: [{<method>: result} | {error}]}`. */
      batch: async (body) => {
        if (!Array.isArray(body.commands)) return { error: replyErrors.badRequest };
        const run = async (command: unknown): Promise<Record<string, unknown>> => {
          const [method, params] = Object.entries((command ?? {}) as Record<string, unknown>)[0] ?? [];
          const handler = method && method !== 'batch' ? this.api[method] : undefined;
          if (!handler) return { error: replyErrors.methodNotFound };
          if (typeof params !== 'object' || params === null) return { error: replyErrors.badRequest };
          const outcome = await handler(params as Record<string, unknown>).catch(() => ({
            error: replyErrors.internal,
          }));
          return 'error' in outcome ? { error: outcome.error } : { [method!]: outcome.result };
        };
        const commands = body.commands as unknown[];
        if (body.parallel === true) return { replies: await Promise.all(commands.map(run)) };
        const replies = [];
        for (const command of commands) replies.push(await run(command));
        return { replies };
      },
      info: async () => ({
        result: {
          nodes: [
            {
              uid: this.nodeId,
              name: this.options.name ?? 'tdp-gateway',
              version,
              ...this.stats(),
              uptime: Math.floor((Date.now() - this.startedAt) / 1000),
            },
          ],
        },
      }),
    };

  private readonly nodeId = randomUUID();

  /** `subscribe` / `unsubscribe` of the server API: a user's connections on every node (or one client). */
  private async membershipFromApi(
    kind: 'subscribe' | 'unsubscribe',
    body: Record<string, unknown>,
  ): Promise<Record<string, unknown>> {
    if (typeof body.user !== 'string' || typeof body.channel !== 'string' || body.channel === '')
      return { error: replyErrors.badRequest };
    await this.engine.sendControl({
      kind,
      user: body.user,
      channel: body.channel,
      ...(typeof body.client === 'string' ? { client: body.client } : {}),
    });
    return { result: {} };
  }

  private async publishFromApi(channel: string, body: Record<string, unknown>): Promise<StreamPosition> {
    const position = await this.publish(channel, body.data, {
      skipHistory: body.skip_history === true,
      ...(typeof body.idempotency_key === 'string' ? { idempotencyKey: body.idempotency_key } : {}),
    });
    return position;
  }

  // ── tokens ───────────────────────────────────────────────────────────────────────────────────────

  private now(): number {
    return (this.options.now ?? Date.now)();
  }

  /** The token's claims; 'expired' for an expired one; null for anything else wrong with it. */
  private async verify(token: string | undefined): Promise<Claims | 'expired' | null> {
    if (!token) return null;
    try {
      const currentDate = new Date(this.now());
      const { payload } = await jwtVerify(
        token,
        async (header, input) => {
          if (header.alg.startsWith('HS')) return this.secret;
          if (!this.jwks) throw new joseErrors.JOSENotSupported('no JWKS is configured');
          return this.jwks(header, input);
        },
        {
          algorithms: ['HS256', 'HS384', 'HS512', ...(this.jwks ? asymmetricAlgorithms : [])],
          currentDate,
        },
      );
      return payload as Claims;
    } catch (error) {
      return error instanceof joseErrors.JWTExpired ? 'expired' : null;
    }
  }
}

const asymmetricAlgorithms = ['RS256', 'RS384', 'RS512', 'ES256', 'ES384', 'ES512', 'PS256', 'EdDSA'];

function expiry(claims: JWTPayload, now: number): Record<string, unknown> {
  if (!claims.exp) return {};
  return { expires: true, ttl: Math.max(1, claims.exp - Math.floor(now / 1000)) };
}

function sameSecret(given: string, expected: string): boolean {
  const a = Buffer.from(given);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}

/** The body as text, or null past `limit` bytes. */
async function readBody(request: IncomingMessage, limit: number): Promise<string | null> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of request) {
    size += (chunk as Buffer).length;
    if (size > limit) return null;
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
}

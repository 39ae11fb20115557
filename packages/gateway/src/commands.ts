/**
 * The protocol session: the commands of one client connection (connect, subscribe, history, refresh, ...)
 * and the reply errors and close codes they answer with (docs/design/realtime-wire-compatibility.md).
 */
import { JsonShapeError, parseCheckedJson } from '@tdp/protocol';
import type { Channels } from './channels.ts';
import { channelOptions } from './namespaces.ts';
import type { ChannelOptions, GatewayOptions } from './options.ts';
import {
  type Close,
  type Command,
  closes,
  type HistoryRequest,
  jsonRefused,
  type RecoverRequest,
  type ReplyError,
  replyErrors,
  version,
} from './protocol.ts';
import type { JoinMode, Session } from './session.ts';
import { type Claims, expiry, type TokenVerifier } from './tokens.ts';

/** Client history reads return at most this many publications. */
const historyLimitCap = 300;

/** A command's reply (null: none) and what follows once it went out; 'closed' when it closed the session. */
export type Reply = { message: unknown | null; after?: () => void } | 'closed';

export interface CommandsDependencies {
  tokens: TokenVerifier;
  channels: Channels;
  /** The engine is running (a connect waits for it before joining its server-side channels). */
  ready: Promise<void>;
  options: Pick<
    GatewayOptions,
    | 'pingIntervalMs'
    | 'expiredCloseDelayMs'
    | 'channelLimits'
    | 'channels'
    | 'insecure'
    | 'allowAnonymousConnectWithoutToken'
    | 'channelMaxLength'
    | 'jsonMaxDepth'
  >;
}

export class Commands {
  constructor(private readonly deps: CommandsDependencies) {}

  /** One frame of a bidirectional transport: `\n`-separated commands, replied to together. */
  async onFrame(session: Session, frame: string): Promise<void> {
    const replies: unknown[] = [];
    const afters: (() => void)[] = [];
    for (const line of frame.split('\n')) {
      if (line.trim() === '') continue;
      let command: Command;
      try {
        command = parseCheckedJson(line, this.deps.options.jsonMaxDepth) as Command;
      } catch (error) {
        if (!(error instanceof JsonShapeError)) throw error; // malformed: the transport's bad request
        session.close(jsonRefused(error.fault.code));
        return;
      }
      if (Object.keys(command).length === 0) {
        session.pingSentAt = null; // a pong
        continue;
      }
      // A command the engine failed (Redis away, e.g. during a Sentinel failover) is answered with a
      // temporary error, which the SDK retries; it is not the client's bad request.
      const reply = await this.handle(session, command).catch(
        (): Reply => ({ message: { id: command.id, error: replyErrors.internalTemporary } }),
      );
      if (reply === 'closed') return;
      if (reply.message) replies.push(reply.message);
      if (reply.after) afters.push(reply.after);
    }
    if (replies.length > 0) session.send(replies);
    for (const after of afters) after();
  }

  async handle(session: Session, command: Command): Promise<Reply> {
    const id = command.id;
    const answer = (key: string, result: Record<string, unknown>, after?: () => void) => ({
      message: { id, [key]: result },
      ...(after ? { after } : {}),
    });
    const fail = (error: ReplyError) => ({ message: { id, error } });
    const close = (reason: Close) => {
      session.close(reason);
      return 'closed' as const;
    };
    const { tokens, channels } = this.deps;
    if (session.user === null && !('connect' in command)) return close(closes.badRequest);

    if ('connect' in command) {
      if (session.user !== null) return close(closes.badRequest);
      const request = (command.connect ?? {}) as { token?: string; subs?: Record<string, RecoverRequest> };
      const { insecure, allowAnonymousConnectWithoutToken } = this.deps.options;
      let claims: Claims;
      if (request.token) {
        const verified = await tokens.verify(request.token);
        if (verified === 'expired') return fail(replyErrors.tokenExpired);
        if (!verified || verified.channel !== undefined) return close(closes.invalidToken);
        // Centrifugo's insecure mode ignores token expiry.
        claims = insecure ? { ...verified, exp: undefined } : verified;
      } else if (insecure || allowAnonymousConnectWithoutToken) claims = { sub: '' };
      else return close(closes.badRequest); // Centrifugo: "client credentials not found"
      session.user = typeof claims.sub === 'string' ? claims.sub : '';
      if (request.token) session.tokenClaims = claims;
      if (claims.info !== undefined) session.info = claims.info;
      this.armExpiry(session, claims);
      await this.deps.ready;
      const serverSide = Array.isArray(claims.channels) ? (claims.channels as string[]) : [];
      if (serverSide.some((channel) => this.optionsOf(channel) === null))
        return fail(replyErrors.unknownChannel);
      const subs: Record<string, unknown> = {};
      const joined: [string, number][] = [];
      for (const channel of serverSide) {
        const mode = joinMode(this.optionsOf(channel)!, false);
        const result = await channels
          .join(session, channel, request.subs?.[channel] ?? {}, true, mode)
          .catch(() => null);
        // The engine failed (Redis away, e.g. during a Sentinel failover): the SDK reconnects (3004).
        if (!result) return close(closes.internal);
        subs[channel] = result.reply;
        joined.push([channel, result.floor]);
      }
      if (session.closed) return 'closed';
      return answer(
        'connect',
        {
          client: session.client,
          version,
          // At least 1: the SDK answers no pings when told 0 (and the gateway would close it, 3012).
          ping: Math.max(1, Math.round((this.deps.options.pingIntervalMs ?? 25_000) / 1000)),
          ...(session.transport.pongs ? { pong: true } : {}),
          ...expiry(claims, tokens.now()),
          ...(Object.keys(subs).length > 0 ? { subs } : {}),
        },
        () => {
          for (const [channel, floor] of joined) channels.activate(session, channel, floor);
        },
      );
    }
    if ('subscribe' in command) {
      const request = command.subscribe as {
        channel?: string;
        token?: string;
        join_leave?: boolean;
      } & RecoverRequest;
      if (!request?.channel) return fail(replyErrors.unknownChannel);
      const maxLength = this.deps.options.channelMaxLength;
      if (maxLength !== undefined && Buffer.byteLength(request.channel) > maxLength)
        return fail(replyErrors.badRequest);
      const namespace = this.optionsOf(request.channel);
      if (!namespace) return fail(replyErrors.unknownChannel);
      let claims: Claims = {};
      if (request.token) {
        const verified = await tokens.verify(request.token);
        if (verified === 'expired') return fail(replyErrors.tokenExpired);
        if (!verified) return fail(replyErrors.permissionDenied);
        // A token without `sub` is for the anonymous user "", as in Centrifugo.
        if ((verified.sub ?? '') !== session.user || verified.channel !== request.channel)
          return close(closes.invalidToken);
        claims = verified;
      } else if (request.channel.startsWith('$') || !this.subscribesWithoutToken(session, namespace))
        return fail(replyErrors.permissionDenied);
      if (session.subscriptions.has(request.channel)) return fail(replyErrors.alreadySubscribed);
      if (this.pastChannelLimit(session, request.channel)) return fail(replyErrors.limitExceeded);
      const channel = request.channel;
      const asked = request.join_leave === true && this.mayPresence(session, namespace, channel, true);
      const mode = joinMode(namespace, asked);
      const result = await channels.join(session, channel, request, false, mode).catch(() => null);
      if (session.closed) return 'closed';
      if (!result) {
        // The engine failed (Redis away, e.g. during a Sentinel failover): temporary, so the SDK
        // subscribes again after a back-off, as it does for Centrifugo's internal error.
        channels.leave(session, channel);
        return fail(replyErrors.internalTemporary);
      }
      return answer('subscribe', { ...result.reply, ...expiry(claims, tokens.now()) }, () =>
        channels.activate(session, channel, result.floor),
      );
    }
    if ('unsubscribe' in command) {
      const channel = (command.unsubscribe as { channel?: string })?.channel ?? '';
      channels.leave(session, channel);
      return answer('unsubscribe', {});
    }
    if ('history' in command) {
      const request = command.history as HistoryRequest;
      if (!request?.channel) return close(closes.badRequest); // Centrifugo: "channel required for history"
      const namespace = this.optionsOf(request.channel);
      if (!namespace) return fail(replyErrors.unknownChannel);
      // Configured namespaces keep history only with both set (Centrifugo's 108 otherwise).
      if (this.deps.options.channels && !(namespace.historySize! > 0 && namespace.historyTtlMs! > 0))
        return fail(replyErrors.notAvailable);
      if (!this.mayReadHistory(session, namespace, request.channel))
        return fail(replyErrors.permissionDenied);
      const read = await channels.history(request, historyLimitCap);
      return 'error' in read ? fail(read.error) : answer('history', read.result);
    }
    if ('refresh' in command) {
      const token = (command.refresh as { token?: string })?.token;
      if (!token) return close(closes.badRequest);
      const claims = await tokens.verify(token);
      if (claims === 'expired') return close(closes.expired);
      if (!claims || (claims.sub ?? '') !== session.user) return close(closes.invalidToken);
      session.tokenClaims = claims;
      this.armExpiry(session, claims);
      return answer('refresh', expiry(claims, tokens.now()));
    }
    if ('sub_refresh' in command) {
      const request = command.sub_refresh as { channel?: string; token?: string };
      const claims = await tokens.verify(request?.token);
      if (claims === 'expired') return fail(replyErrors.tokenExpired);
      if (!claims || (claims.sub ?? '') !== session.user || claims.channel !== request.channel)
        return close(closes.invalidToken);
      return answer('sub_refresh', expiry(claims, tokens.now()));
    }
    if ('send' in command) return close(closes.notAvailable);
    if ('publish' in command) {
      const request = command.publish as { channel?: string; data?: unknown };
      const namespace = request?.channel ? this.optionsOf(request.channel) : null;
      if (!request?.channel || !namespace) return fail(replyErrors.unknownChannel);
      if (!this.mayPublish(session, namespace, request.channel)) return fail(replyErrors.permissionDenied);
      await channels.publish(request.channel, request.data, {});
      return answer('publish', {});
    }
    if ('presence' in command || 'presence_stats' in command) {
      const key = 'presence' in command ? 'presence' : 'presence_stats';
      const channel = (command[key] as { channel?: string })?.channel;
      const namespace = channel ? this.optionsOf(channel) : null;
      if (!channel || !namespace) return fail(replyErrors.unknownChannel);
      if (!namespace.presence) return fail(replyErrors.notAvailable);
      if (!this.mayPresence(session, namespace, channel, false)) return fail(replyErrors.permissionDenied);
      const present = await channels.presence(channel);
      if (key === 'presence_stats') {
        const entries = Object.values(present);
        return answer(key, {
          num_clients: entries.length,
          num_users: new Set(entries.map((entry) => entry.user)).size,
        });
      }
      return answer(key, { presence: present });
    }
    return fail(replyErrors.methodNotFound);
  }

  private optionsOf(channel: string): ChannelOptions | null {
    return channelOptions(this.deps.options, channel);
  }

  /** Centrifugo's `allow_subscribe_for_client` (anonymous users with `_for_anonymous`), or insecure. */
  private subscribesWithoutToken(session: Session, namespace: ChannelOptions): boolean {
    const anonymousOk = session.user !== '' || namespace.allowSubscribeForAnonymous === true;
    return (namespace.allowSubscribeForClient === true && anonymousOk) || this.deps.options.insecure === true;
  }

  /** Centrifugo's `allow_publish_for_client` / `_for_subscriber` (`_for_anonymous`), or insecure. */
  private mayPublish(session: Session, namespace: ChannelOptions, channel: string): boolean {
    const anonymousOk = session.user !== '' || namespace.allowPublishForAnonymous === true;
    if (namespace.allowPublishForClient && anonymousOk) return true;
    if (namespace.allowPublishForSubscriber && session.subscriptions.has(channel) && anonymousOk) return true;
    return this.deps.options.insecure === true;
  }

  /** Centrifugo's `hasAccessToPresence`; `subscribing` counts the subscription being made. */
  private mayPresence(session: Session, namespace: ChannelOptions, channel: string, subscribing: boolean) {
    const anonymousOk = session.user !== '' || namespace.allowPresenceForAnonymous === true;
    if (namespace.allowPresenceForClient && anonymousOk) return true;
    const subscribed = subscribing || session.subscriptions.has(channel);
    if (namespace.allowPresenceForSubscriber && subscribed && anonymousOk) return true;
    return this.deps.options.insecure === true;
  }

  /** Centrifugo's `hasAccessToHistory`: `allow_history_for_client` / `_for_subscriber` (`_for_anonymous`). */
  private mayReadHistory(session: Session, namespace: ChannelOptions, channel: string): boolean {
    const anonymousOk = session.user !== '' || namespace.allowHistoryForAnonymous === true;
    if (namespace.allowHistoryForClient && anonymousOk) return true;
    if (namespace.allowHistoryForSubscriber && session.subscriptions.has(channel) && anonymousOk) return true;
    return this.deps.options.insecure === true;
  }

  /** Whether the session already follows as many channels of `channel`'s namespace as it may. */
  private pastChannelLimit(session: Session, channel: string): boolean {
    const limit = this.deps.options.channelLimits?.find((l) => channel.startsWith(l.prefix));
    return limit !== undefined && session.subscriptionsTo(limit.prefix) >= limit.max;
  }

  /** Closes the connection with 3005 once its token has expired and was not refreshed in time. */
  private armExpiry(session: Session, claims: Claims): void {
    if (!claims.exp) {
      session.expiresAt = null;
      return;
    }
    const closeAt = claims.exp * 1000 + (this.deps.options.expiredCloseDelayMs ?? 25_000);
    // On the timers' clock: connections.ts checks it with Date.now().
    session.expiresAt = Date.now() + Math.max(0, closeAt - this.deps.tokens.now());
  }
}

/** How a subscription to a channel of `namespace` behaves; `askedJoinLeave`: the client asked, and may. */
function joinMode(namespace: ChannelOptions, askedJoinLeave: boolean): JoinMode {
  return {
    recoverable: namespace.forceRecovery === true,
    presence: namespace.presence === true,
    emitJoinLeave: namespace.joinLeave === true,
    pushJoinLeave: namespace.joinLeave === true && (namespace.forcePushJoinLeave === true || askedJoinLeave),
  };
}
